//! The conversation the agent keeps between prompts, as the agent-runner keeps it: a prompt and its answer are
//! added after a successful call (a failed call leaves no half turn behind), a clear-context request empties it, and
//! `USE_CONTEXT=false` answers every prompt on its own.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

#[derive(Debug)]
pub struct History {
    use_context: bool,
    system: Option<String>,
    turns: Vec<Message>,
}

impl History {
    pub fn new(use_context: bool, system: Option<String>) -> Self {
        History { use_context, system, turns: Vec::new() }
    }

    pub fn use_context(&self) -> bool {
        self.use_context
    }

    /// What the model is sent for `prompt`: the system prompt, the history, the prompt.
    pub fn messages_for(&self, prompt: &str) -> Vec<Message> {
        let system = self.system.iter().map(|text| Message { role: "system", content: text.clone() });
        let user = Message { role: "user", content: prompt.to_owned() };
        system.chain(self.turns.iter().cloned()).chain([user]).collect()
    }

    pub fn record(&mut self, prompt: &str, answer: &str) {
        if self.use_context {
            self.turns.push(Message { role: "user", content: prompt.to_owned() });
            self.turns.push(Message { role: "assistant", content: answer.to_owned() });
        }
    }

    pub fn clear(&mut self) {
        self.turns.clear();
    }

    /// Messages of earlier turns sent along with the next prompt.
    pub fn earlier_messages(&self) -> usize {
        self.turns.len()
    }
}

/// `USE_CONTEXT`, read as the agent-runner reads it: unset or empty is true, then only `true` (any case) or `1`.
pub fn use_context_from(value: Option<&str>) -> bool {
    match value {
        None | Some("") => true,
        Some(value) => value.eq_ignore_ascii_case("true") || value == "1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_accumulate_until_cleared() {
        let mut history = History::new(true, Some("be brief".into()));
        history.record("a", "A");
        let roles: Vec<_> = history.messages_for("b").iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        history.clear();
        assert_eq!(history.messages_for("c").len(), 2);
        let mut isolated = History::new(false, None);
        isolated.record("a", "A");
        assert_eq!(isolated.messages_for("b"), [Message { role: "user", content: "b".into() }]);
    }

    #[test]
    fn use_context_reads_like_the_agent() {
        assert!(use_context_from(None) && use_context_from(Some("")) && use_context_from(Some("TRUE")));
        assert!(use_context_from(Some("1")));
        assert!(!use_context_from(Some("false")) && !use_context_from(Some("yes")));
    }
}

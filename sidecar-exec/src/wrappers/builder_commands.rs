//! Which of its runtime's commands each build sidecar has, asked at install time: its `GET /info` `commands`
//!, all sidecars at once, each within [`ASK_WITHIN`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::sidecar::config::sidecars::Sidecars;
use crate::sidecar::wire::body::small_text;
use crate::sidecar::wire::http::{authorized, http_client, location, refusal, transport_error};
use crate::terminal_safe::terminal_safe;
use crate::wrappers::answer;

/// How long one sidecar has to answer `/info`. *Decision:* 2 s, all sidecars in parallel, so an agent whose builders
/// are not up yet starts within 2 s (with every command wrapped: [`answer::Answer::lacks`]); a builder that is up
/// answers in well under a millisecond on its private network.
pub const ASK_WITHIN: Duration = Duration::from_secs(2);

/// What one sidecar said about its commands: those of its runtime it has, or why it gave no list (then its whole
/// table is wrapped: [`answer::Answer::lacks`]).
pub type Answer = answer::Answer<Unlisted>;

/// Why a sidecar's commands are not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlisted {
    /// No answer within [`ASK_WITHIN`], a transport error, a refusal or an unreadable reply: what happened.
    NoAnswer(String),
    /// It answered, without `commands` (a server that only speaks the contract).
    NotSaid,
    /// It reports another runtime than the one BUILD_SIDECARS gives it, so its list is of another table.
    OtherRuntime(String),
}

impl fmt::Display for Unlisted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unlisted::NoAnswer(why) => write!(f, "gave no /info ({why})"),
            Unlisted::NotSaid => f.write_str("does not say which commands it has (its /info has no `commands`)"),
            Unlisted::OtherRuntime(runtime) => write!(f, "reports runtime '{}'", terminal_safe(runtime)),
        }
    }
}

impl answer::WhyNoList for Unlisted {
    fn what_to_do(&self) -> &'static str {
        match self {
            Unlisted::NoAnswer(_) => "run this again once it is up",
            Unlisted::NotSaid => {
                "a newer exec-server says which it has (GET /info `commands`): upgrade it and run this again to wrap \
                 only those"
            }
            Unlisted::OtherRuntime(_) => {
                "check that BUILD_SIDECARS gives this runtime its own sidecar's URL, then run this again"
            }
        }
    }
}

/// Asks every configured sidecar whose runtime the table knows, in parallel, each within [`ASK_WITHIN`].
pub async fn ask_all(sidecars: &Sidecars) -> BTreeMap<String, Answer> {
    let runtimes: Vec<&str> = sidecars.runtimes().filter(|runtime| protocol::commands_for(runtime).is_some()).collect();
    let answers = futures_util::future::join_all(runtimes.iter().map(|runtime| async move {
        let answer = match tokio::time::timeout(ASK_WITHIN, ask(sidecars, runtime)).await {
            Ok(answer) => answer,
            Err(_) => Answer::Unknown(Unlisted::NoAnswer(format!("no answer within {} s", ASK_WITHIN.as_secs()))),
        };
        ((*runtime).to_owned(), answer)
    }))
    .await;
    answers.into_iter().collect()
}

async fn ask(sidecars: &Sidecars, runtime: &str) -> Answer {
    let no_answer = |why: String| Answer::Unknown(Unlisted::NoAnswer(why));
    let target = match sidecars.target(runtime) {
        Ok(target) => target,
        Err(err) => return no_answer(err.to_string()),
    };
    let client = match http_client(None, target.socket.as_deref()) {
        Ok(client) => client,
        Err(err) => return no_answer(err.to_string()),
    };
    let response = match authorized(client.get(target.endpoint("/info")), &target, None).send().await {
        Ok(response) => response,
        Err(err) => return no_answer(transport_error(&target, &err)),
    };
    let (status, location) = (response.status(), location(&response));
    let body = small_text(response).await;
    if !status.is_success() {
        return no_answer(refusal(&target, None, status, location.as_deref(), &body));
    }
    match serde_json::from_str::<protocol::Info>(&body) {
        Err(err) => no_answer(format!("an unreadable /info reply: {err}")),
        Ok(info) if info.runtime != runtime => Answer::Unknown(Unlisted::OtherRuntime(info.runtime)),
        Ok(protocol::Info { commands: Some(commands), .. }) => Answer::Has(commands),
        Ok(_) => Answer::Unknown(Unlisted::NotSaid),
    }
}

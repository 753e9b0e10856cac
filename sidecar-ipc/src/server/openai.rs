//! The OpenAI-compatible backend: one `POST {url}/chat/completions` per prompt, to OpenAI or any server that speaks
//! its chat-completions API (llama.cpp's server, vLLM, Ollama, LM Studio, …). A request schema is sent as
//! `response_format: {"type": "json_schema", …}` (structured output).

use std::error::Error as _;
use std::time::Duration;

use serde_json::{json, Value};

use super::history::Message;
use super::Reply;
use crate::schema::SchemaSpec;
use crate::wire::Metrics;
use agent_files::excerpt;

pub struct OpenAi {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl OpenAi {
    /// `base` is the API root (`http://localhost:8080/v1`) or the full chat-completions URL. The key is read from
    /// the environment variable `key_var`; unset or empty sends no `Authorization` (local servers need none).
    pub fn new(base: &str, model: &str, key_var: &str, timeout: Duration) -> Result<Self, String> {
        let url = endpoint(base)?;
        let api_key = std::env::var(key_var).ok().filter(|key| !key.trim().is_empty()).map(|key| key.trim().to_owned());
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .map_err(|err| format!("cannot set up the HTTP client: {err}"))?;
        Ok(OpenAi { client, url, model: model.to_owned(), api_key })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub async fn complete(&self, messages: &[Message], schema: Option<&SchemaSpec>) -> Result<Reply, String> {
        let mut body = json!({"model": self.model, "messages": messages});
        if let Some(schema) = schema {
            body["response_format"] = schema.to_response_format();
        }
        let mut request = self.client.post(&self.url).header("content-type", "application/json").body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|err| format!("cannot reach {}: {}", self.url, chain(&err)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|err| format!("{} answered HTTP {status}, then {}", self.url, chain(&err)))?;
        if !status.is_success() {
            return Err(format!("{} answered HTTP {}: {}", self.url, status.as_u16(), error_message(&bytes)));
        }
        let body: Value = serde_json::from_slice(&bytes).map_err(|err| {
            format!("{} answered with something that is not JSON ({err}): {}", self.url, excerpt(&bytes))
        })?;
        reply_from(&body).map_err(|err| format!("{}: {err}", self.url))
    }
}

fn endpoint(base: &str) -> Result<String, String> {
    let base = base.trim().trim_end_matches('/');
    let Some((scheme, _)) = base.split_once("://") else {
        return Err(format!("--openai-url {base:?} is not a URL: give one like http://localhost:8080/v1"));
    };
    match scheme {
        "http" => {}
        "https" if cfg!(feature = "tls") => {}
        "https" => {
            return Err(format!(
                "--openai-url {base} needs TLS, which this build leaves out: build with `--features tls`, or use a \
                 plain http:// endpoint"
            ))
        }
        other => return Err(format!("--openai-url {base}: the scheme must be http or https, not {other}")),
    }
    if base.ends_with("/chat/completions") {
        Ok(base.to_owned())
    } else {
        Ok(format!("{base}/chat/completions"))
    }
}

/// The text and token counts of a chat-completions answer.
fn reply_from(body: &Value) -> Result<Reply, String> {
    let usage = &body["usage"];
    let metrics = Metrics {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or_default(),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or_default(),
    };
    let Some(message) = body["choices"].get(0).map(|choice| &choice["message"]) else {
        return Err(format!("the answer has no choices: {}", excerpt(body.to_string().as_bytes())));
    };
    if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
        return Err(format!("the model refused: {refusal}"));
    }
    match message["content"].as_str() {
        Some(text) => Ok(Reply { text: text.to_owned(), metrics }),
        None => Err(format!("the answer's message has no text content: {}", excerpt(message.to_string().as_bytes()))),
    }
}

/// The `error.message` of an error body, or the body itself.
fn error_message(bytes: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let message = parsed.as_ref().and_then(|body| body["error"]["message"].as_str().or(body["error"].as_str()));
    match message {
        Some(message) => message.to_owned(),
        None if bytes.is_empty() => "(empty body)".to_owned(),
        None => excerpt(bytes),
    }
}

/// An error with its causes: reqwest's own message alone rarely says what failed.
fn chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("http://h:1/v1/").unwrap(), "http://h:1/v1/chat/completions");
        assert_eq!(endpoint("http://h:1/v1/chat/completions").unwrap(), "http://h:1/v1/chat/completions");
        assert!(endpoint("localhost:8080").unwrap_err().contains("not a URL"));
        assert!(endpoint("ftp://h").unwrap_err().contains("http or https"));
    }

    #[test]
    fn answers_and_errors_map() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}],
                          "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        let reply = reply_from(&body).unwrap();
        assert_eq!((reply.text.as_str(), reply.metrics), ("hi", Metrics { input_tokens: 7, output_tokens: 2 }));
        assert!(reply_from(&json!({"choices": []})).unwrap_err().contains("no choices"));
        assert_eq!(error_message(br#"{"error": {"message": "bad key"}}"#), "bad key");
        assert_eq!(error_message(b"gateway down"), "\"gateway down\"");
    }
}

//! The OpenAI-compatible backend: one `POST {url}/chat/completions` per prompt, to OpenAI or any server that speaks
//! its chat-completions API (llama.cpp's server, vLLM, Ollama, LM Studio, …). A request schema is sent as
//! `response_format: {"type": "json_schema", …}` (structured output).

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use serde_json::{json, Value};

use super::history::Message;
use super::Reply;
use crate::schema::SchemaSpec;
use crate::wire::TokenUsage;
use agent_files::excerpt;

/// Why `--openai-url` cannot be used: a usage error, found at start.
#[derive(Debug)]
pub enum EndpointError {
    NotAUrl {
        base: String,
    },
    /// An https:// endpoint in a build without the `tls` feature.
    NeedsTls {
        base: String,
    },
    Scheme {
        base: String,
        scheme: String,
    },
    /// The HTTP client could not be built.
    Client(reqwest::Error),
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointError::NotAUrl { base } => {
                write!(f, "--openai-url {base:?} is not a URL: give one like http://localhost:8080/v1")
            }
            EndpointError::NeedsTls { base } => write!(
                f,
                "--openai-url {base} needs TLS, which this build leaves out: build with `--features tls`, or use a \
                 plain http:// endpoint"
            ),
            EndpointError::Scheme { base, scheme } => {
                write!(f, "--openai-url {base}: the scheme must be http or https, not {scheme}")
            }
            EndpointError::Client(err) => write!(f, "cannot set up the HTTP client: {err}"),
        }
    }
}

impl std::error::Error for EndpointError {}

/// Why one call to the endpoint gave no text; the prompt gets it as its error result.
#[derive(Debug)]
pub enum CompletionError {
    Unreachable {
        url: String,
        source: reqwest::Error,
    },
    /// The status came, then the body broke off.
    BodyCut {
        url: String,
        status: reqwest::StatusCode,
        source: reqwest::Error,
    },
    /// Not a 2xx: the status and the body's `error.message` (or the body).
    Status {
        url: String,
        status: u16,
        message: String,
    },
    NotJson {
        url: String,
        error: serde_json::Error,
        excerpt: String,
    },
    /// JSON, but no answer in it.
    Answer {
        url: String,
        problem: AnswerProblem,
    },
}

/// What a chat-completions body that is JSON lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerProblem {
    NoChoices { excerpt: String },
    Refused { refusal: String },
    NoText { excerpt: String },
}

impl fmt::Display for CompletionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompletionError::Unreachable { url, source } => write!(f, "cannot reach {url}: {}", chain(source)),
            CompletionError::BodyCut { url, status, source } => {
                write!(f, "{url} answered HTTP {status}, then {}", chain(source))
            }
            CompletionError::Status { url, status, message } => write!(f, "{url} answered HTTP {status}: {message}"),
            CompletionError::NotJson { url, error, excerpt } => {
                write!(f, "{url} answered with something that is not JSON ({error}): {excerpt}")
            }
            CompletionError::Answer { url, problem } => write!(f, "{url}: {problem}"),
        }
    }
}

impl fmt::Display for AnswerProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerProblem::NoChoices { excerpt } => write!(f, "the answer has no choices: {excerpt}"),
            AnswerProblem::Refused { refusal } => write!(f, "the model refused: {refusal}"),
            AnswerProblem::NoText { excerpt } => write!(f, "the answer's message has no text content: {excerpt}"),
        }
    }
}

impl std::error::Error for CompletionError {}

pub struct OpenAi {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl OpenAi {
    /// `base` is the API root (`http://localhost:8080/v1`) or the full chat-completions URL. The key is read from
    /// the environment variable `key_var`; unset or empty sends no `Authorization` (local servers need none).
    pub fn new(base: &str, model: &str, key_var: &str, timeout: Duration) -> Result<Self, EndpointError> {
        let url = endpoint(base)?;
        let api_key = std::env::var(key_var).ok().filter(|key| !key.trim().is_empty()).map(|key| key.trim().to_owned());
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .map_err(EndpointError::Client)?;
        Ok(OpenAi { client, url, model: model.to_owned(), api_key })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub async fn complete(&self, messages: &[Message], schema: Option<&SchemaSpec>) -> Result<Reply, CompletionError> {
        let mut body = json!({"model": self.model, "messages": messages});
        if let Some(schema) = schema {
            body["response_format"] = schema.to_response_format();
        }
        let mut request = self.client.post(&self.url).header("content-type", "application/json").body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let url = || self.url.clone();
        let response = request.send().await.map_err(|source| CompletionError::Unreachable { url: url(), source })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|source| CompletionError::BodyCut { url: url(), status, source })?;
        if !status.is_success() {
            return Err(CompletionError::Status {
                url: url(),
                status: status.as_u16(),
                message: error_message(&bytes),
            });
        }
        let body: Value = serde_json::from_slice(&bytes).map_err(|error| CompletionError::NotJson {
            url: url(),
            error,
            excerpt: excerpt(&bytes),
        })?;
        reply_from(&body).map_err(|problem| CompletionError::Answer { url: url(), problem })
    }
}

fn endpoint(base: &str) -> Result<String, EndpointError> {
    let base = base.trim().trim_end_matches('/');
    let Some((scheme, _)) = base.split_once("://") else {
        return Err(EndpointError::NotAUrl { base: base.to_owned() });
    };
    match scheme {
        "http" => {}
        "https" if cfg!(feature = "tls") => {}
        "https" => return Err(EndpointError::NeedsTls { base: base.to_owned() }),
        other => return Err(EndpointError::Scheme { base: base.to_owned(), scheme: other.to_owned() }),
    }
    if base.ends_with("/chat/completions") {
        Ok(base.to_owned())
    } else {
        Ok(format!("{base}/chat/completions"))
    }
}

/// The text and token counts of a chat-completions answer.
fn reply_from(body: &Value) -> Result<Reply, AnswerProblem> {
    let usage = &body["usage"];
    let metrics = TokenUsage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or_default(),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or_default(),
    };
    let Some(message) = body["choices"].get(0).map(|choice| &choice["message"]) else {
        return Err(AnswerProblem::NoChoices { excerpt: excerpt(body.to_string().as_bytes()) });
    };
    if let Some(refusal) = message["refusal"].as_str().filter(|r| !r.is_empty()) {
        return Err(AnswerProblem::Refused { refusal: refusal.to_owned() });
    }
    match message["content"].as_str() {
        Some(text) => Ok(Reply { text: text.to_owned(), metrics }),
        None => Err(AnswerProblem::NoText { excerpt: excerpt(message.to_string().as_bytes()) }),
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
        let err = endpoint("localhost:8080").unwrap_err();
        assert!(matches!(err, EndpointError::NotAUrl { .. }) && err.to_string().contains("not a URL"), "{err}");
        let err = endpoint("ftp://h").unwrap_err();
        assert!(matches!(&err, EndpointError::Scheme { scheme, .. } if scheme == "ftp"), "{err:?}");
        assert!(err.to_string().contains("http or https"), "{err}");
    }

    #[test]
    fn answers_and_errors_map() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}],
                          "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        let reply = reply_from(&body).unwrap();
        assert_eq!((reply.text.as_str(), reply.metrics), ("hi", TokenUsage { input_tokens: 7, output_tokens: 2 }));
        let err = reply_from(&json!({"choices": []})).unwrap_err();
        assert!(matches!(err, AnswerProblem::NoChoices { .. }) && err.to_string().contains("no choices"), "{err}");
        let refused = json!({"choices": [{"message": {"refusal": "no"}}]});
        assert_eq!(reply_from(&refused).unwrap_err(), AnswerProblem::Refused { refusal: "no".into() });
        assert_eq!(error_message(br#"{"error": {"message": "bad key"}}"#), "bad key");
        assert_eq!(error_message(b"gateway down"), "\"gateway down\"");
    }
}

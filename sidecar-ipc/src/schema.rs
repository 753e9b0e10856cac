//! Answer schemas: the shapes a request's `schema` comes in, the form we write, and validation of answers.
//!
//! The agent-runner passes `schema` through untouched and only turns it into OpenAI structured output when it is an
//! envelope `{"type": "json_schema", "name": …, "schema": {…}, "strict": …}` (with anything else it only checks that
//! the answer is JSON). So `sidecar-ipc prompt` writes that envelope, with `strict: false` unless given, because the
//! agent's default of strict mode rejects ordinary schemas (optional properties, no `additionalProperties: false`).
//! Read back, every shape in use is understood: a plain JSON Schema, that envelope, OpenAI's own `response_format`
//! (`{"type": "json_schema", "json_schema": {…}}`), and any of these as a JSON string (the Python guide's
//! `json.dumps(schema)`).

use std::fmt;

use agent_files::excerpt;
use serde_json::{json, Map, Value};

/// The name sent to the model when the schema has none (OpenAI wants `^[A-Za-z0-9_-]{1,64}$`).
const DEFAULT_NAME: &str = "response";

/// Violations an answer's error shows at most (all are kept in [`Mismatch`]).
const SHOWN_VIOLATIONS: usize = 5;

/// Why a request's `schema` (or `--schema`) cannot be used.
#[derive(Debug)]
pub enum SchemaError {
    /// A string that does not hold JSON.
    StringNotJson(serde_json::Error),
    /// A string that holds another string.
    StringOfString,
    /// A `{"type": "json_schema"}` envelope without its schema.
    EnvelopeWithoutSchema,
    /// Neither an object nor a boolean (nor null or empty): what it is instead.
    NotSchema { kind: &'static str },
    /// Not a valid JSON Schema, as the validator says.
    Invalid(Box<jsonschema::ValidationError<'static>>),
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::StringNotJson(err) => write!(f, "the schema is a string that does not hold JSON ({err})"),
            SchemaError::StringOfString => {
                f.write_str("the schema is a string holding another string, not a JSON Schema")
            }
            SchemaError::EnvelopeWithoutSchema => {
                f.write_str("a {\"type\": \"json_schema\"} envelope needs its JSON Schema in a \"schema\" field")
            }
            SchemaError::NotSchema { kind } => write!(f, "the schema must be a JSON Schema object, not {kind}"),
            SchemaError::Invalid(err) => write!(f, "the schema is not a valid JSON Schema: {err}"),
        }
    }
}

impl std::error::Error for SchemaError {}

/// One way an answer breaks its schema: where (a JSON pointer, `(root)` for the whole) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: String,
    pub message: String,
}

/// An answer that does not match its schema: every violation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub violations: Vec<Violation>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .violations
            .iter()
            .take(SHOWN_VIOLATIONS)
            .map(|violation| format!("{}: {}", violation.at, violation.message))
            .collect();
        write!(f, "the answer does not match the schema: {}", shown.join("; "))?;
        if self.violations.len() > SHOWN_VIOLATIONS {
            write!(f, " (and {} more)", self.violations.len() - SHOWN_VIOLATIONS)?;
        }
        Ok(())
    }
}

impl std::error::Error for Mismatch {}

/// Why an answer to a prompt with a schema is not one.
#[derive(Debug)]
pub enum AnswerError {
    NotJson { error: serde_json::Error, excerpt: String },
    Mismatch(Mismatch),
}

impl fmt::Display for AnswerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnswerError::NotJson { error, excerpt } => {
                write!(f, "a schema was given but the answer is not valid JSON ({error}): {excerpt}")
            }
            AnswerError::Mismatch(mismatch) => mismatch.fmt(f),
        }
    }
}

impl std::error::Error for AnswerError {}

impl From<Mismatch> for AnswerError {
    fn from(mismatch: Mismatch) -> Self {
        AnswerError::Mismatch(mismatch)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaSpec {
    pub name: String,
    pub schema: Value,
    pub strict: Option<bool>,
}

impl SchemaSpec {
    /// The schema in a request's `schema` field (or in `--schema`); `None` when there is none.
    pub fn from_value(value: &Value) -> Result<Option<SchemaSpec>, SchemaError> {
        match value {
            Value::Null => Ok(None),
            Value::String(text) if text.trim().is_empty() => Ok(None),
            Value::String(text) => {
                let inner: Value = serde_json::from_str(text).map_err(SchemaError::StringNotJson)?;
                if inner.is_string() {
                    return Err(SchemaError::StringOfString);
                }
                Self::from_value(&inner)
            }
            Value::Bool(_) => Ok(Some(SchemaSpec::plain(value.clone()))),
            Value::Object(object) if object.get("type").and_then(Value::as_str) == Some("json_schema") => {
                // OpenAI's response_format nests the envelope one level deeper.
                let envelope = object.get("json_schema").and_then(Value::as_object).unwrap_or(object);
                Self::from_envelope(envelope).map(Some)
            }
            Value::Object(_) => Ok(Some(SchemaSpec::plain(value.clone()))),
            other => Err(SchemaError::NotSchema { kind: kind(other) }),
        }
    }

    fn plain(schema: Value) -> Self {
        SchemaSpec { name: DEFAULT_NAME.to_owned(), schema, strict: None }
    }

    fn from_envelope(envelope: &Map<String, Value>) -> Result<Self, SchemaError> {
        let schema = envelope
            .get("schema")
            .filter(|schema| schema.is_object() || schema.is_boolean())
            .ok_or(SchemaError::EnvelopeWithoutSchema)?;
        let name = envelope.get("name").and_then(Value::as_str).filter(|name| is_valid_name(name));
        Ok(SchemaSpec {
            name: name.unwrap_or(DEFAULT_NAME).to_owned(),
            schema: schema.clone(),
            strict: envelope.get("strict").and_then(Value::as_bool),
        })
    }

    /// The request field we write: the envelope the agent-runner turns into structured output.
    pub fn to_request_field(&self) -> Value {
        json!({"type": "json_schema", "name": self.name, "schema": self.schema, "strict": self.strict.unwrap_or(false)})
    }

    /// OpenAI's `response_format` for this schema.
    pub fn to_response_format(&self) -> Value {
        json!({"type": "json_schema", "json_schema": {
            "name": self.name, "schema": self.schema, "strict": self.strict.unwrap_or(false)
        }})
    }

    /// Compiles the schema; an error names what is wrong in it.
    pub fn validator(&self) -> Result<jsonschema::Validator, SchemaError> {
        jsonschema::validator_for(&self.schema).map_err(|err| SchemaError::Invalid(Box::new(err)))
    }
}

/// Checks `instance` against `validator`; the error holds every violation, with its JSON pointer.
pub fn check(validator: &jsonschema::Validator, instance: &Value) -> Result<(), Mismatch> {
    let violations: Vec<Violation> = validator
        .iter_errors(instance)
        .map(|err| {
            let at = err.instance_path().to_string();
            Violation { at: if at.is_empty() { "(root)".to_owned() } else { at }, message: err.to_string() }
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Mismatch { violations })
    }
}

/// An answer's text read as the JSON a schema asks for (surrounding whitespace aside).
pub fn parse_answer(text: &str) -> Result<Value, AnswerError> {
    serde_json::from_str(text.trim()).map_err(|error| AnswerError::NotJson { error, excerpt: excerpt(text.as_bytes()) })
}

/// An answer's text as JSON that matches `validator`'s schema: what both halves check an answer with.
pub fn checked_answer(validator: &jsonschema::Validator, text: &str) -> Result<Value, AnswerError> {
    let parsed = parse_answer(text)?;
    check(validator, &parsed)?;
    Ok(parsed)
}

fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags() -> Value {
        json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["tags"]})
    }

    #[test]
    fn every_shape_in_use_reads_as_the_same_schema() {
        let plain = SchemaSpec::from_value(&tags()).unwrap().unwrap();
        assert_eq!(plain, SchemaSpec { name: "response".into(), schema: tags(), strict: None });
        let as_string = Value::String(tags().to_string());
        assert_eq!(SchemaSpec::from_value(&as_string).unwrap().unwrap(), plain);
        let envelope = json!({"type": "json_schema", "name": "tagger", "schema": tags(), "strict": true});
        let spec = SchemaSpec::from_value(&envelope).unwrap().unwrap();
        assert_eq!((spec.name.as_str(), &spec.schema, spec.strict), ("tagger", &tags(), Some(true)));
        let openai = json!({"type": "json_schema", "json_schema": {"name": "tagger", "schema": tags()}});
        assert_eq!(SchemaSpec::from_value(&openai).unwrap().unwrap().name, "tagger");
        assert_eq!(SchemaSpec::from_value(&Value::Null).unwrap(), None);
        assert!(matches!(SchemaSpec::from_value(&json!([1])), Err(SchemaError::NotSchema { kind: "an array" })));
        let envelope = SchemaSpec::from_value(&json!({"type": "json_schema"}));
        assert!(matches!(envelope, Err(SchemaError::EnvelopeWithoutSchema)));
        let nested = SchemaSpec::from_value(&Value::String("\"x\"".into()));
        assert!(matches!(nested, Err(SchemaError::StringOfString)));
    }

    #[test]
    fn what_we_write_reads_back_unchanged() {
        let spec = SchemaSpec::from_value(&tags()).unwrap().unwrap();
        let field = spec.to_request_field();
        assert_eq!(field["strict"], json!(false));
        assert_eq!(SchemaSpec::from_value(&field).unwrap().unwrap().schema, tags());
    }

    #[test]
    fn violations_name_their_place() {
        let validator = SchemaSpec::from_value(&tags()).unwrap().unwrap().validator().unwrap();
        assert!(check(&validator, &json!({"tags": ["a"]})).is_ok());
        let err = check(&validator, &json!({"tags": ["a", 3]})).unwrap_err();
        assert_eq!(err.violations.len(), 1);
        assert_eq!(err.violations[0].at, "/tags/1");
        assert!(err.to_string().contains("/tags/1") && err.to_string().contains("string"), "{err}");
        assert_eq!(check(&validator, &json!({})).unwrap_err().violations[0].at, "(root)");
        let broken = SchemaSpec::from_value(&json!({"type": 5})).unwrap().unwrap();
        let err = broken.validator().unwrap_err();
        assert!(matches!(err, SchemaError::Invalid(_)) && err.to_string().contains("not a valid JSON Schema"));
    }

    #[test]
    fn answers_are_json_that_matches_or_say_why_not() {
        let validator = SchemaSpec::from_value(&tags()).unwrap().unwrap().validator().unwrap();
        assert_eq!(checked_answer(&validator, " {\"tags\": []}\n").unwrap(), json!({"tags": []}));
        let err = checked_answer(&validator, "sure! {").unwrap_err();
        assert!(matches!(err, AnswerError::NotJson { .. }));
        assert!(err.to_string().starts_with("a schema was given but the answer is not valid JSON"), "{err}");
        let many: Vec<Value> = (0..7).map(Value::from).collect();
        let err = checked_answer(&validator, &json!({"tags": many}).to_string()).unwrap_err();
        let AnswerError::Mismatch(mismatch) = &err else { panic!("{err}") };
        assert_eq!(mismatch.violations.len(), 7);
        assert!(err.to_string().ends_with(" (and 2 more)"), "{err}");
    }
}

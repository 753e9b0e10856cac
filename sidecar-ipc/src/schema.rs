//! Answer schemas: the shapes a request's `schema` comes in, the form we write, and validation of answers.
//!
//! The agent-runner passes `schema` through untouched and only turns it into OpenAI structured output when it is an
//! envelope `{"type": "json_schema", "name": …, "schema": {…}, "strict": …}` (with anything else it only checks that
//! the answer is JSON). So `sidecar-ipc prompt` writes that envelope, with `strict: false` unless given, because the
//! agent's default of strict mode rejects ordinary schemas (optional properties, no `additionalProperties: false`).
//! Read back, every shape in use is understood: a plain JSON Schema, that envelope, OpenAI's own `response_format`
//! (`{"type": "json_schema", "json_schema": {…}}`), and any of these as a JSON string (the Python guide's
//! `json.dumps(schema)`).

use serde_json::{json, Map, Value};

/// The name sent to the model when the schema has none (OpenAI wants `^[A-Za-z0-9_-]{1,64}$`).
const DEFAULT_NAME: &str = "response";

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaSpec {
    pub name: String,
    pub schema: Value,
    pub strict: Option<bool>,
}

impl SchemaSpec {
    /// The schema in a request's `schema` field (or in `--schema`); `None` when there is none.
    pub fn from_value(value: &Value) -> Result<Option<SchemaSpec>, String> {
        match value {
            Value::Null => Ok(None),
            Value::String(text) if text.trim().is_empty() => Ok(None),
            Value::String(text) => {
                let inner: Value = serde_json::from_str(text)
                    .map_err(|err| format!("the schema is a string that does not hold JSON ({err})"))?;
                if inner.is_string() {
                    return Err("the schema is a string holding another string, not a JSON Schema".to_owned());
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
            other => Err(format!("the schema must be a JSON Schema object, not {}", kind(other))),
        }
    }

    fn plain(schema: Value) -> Self {
        SchemaSpec { name: DEFAULT_NAME.to_owned(), schema, strict: None }
    }

    fn from_envelope(envelope: &Map<String, Value>) -> Result<Self, String> {
        let schema = envelope
            .get("schema")
            .filter(|schema| schema.is_object() || schema.is_boolean())
            .ok_or("a {\"type\": \"json_schema\"} envelope needs its JSON Schema in a \"schema\" field")?;
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
    pub fn validator(&self) -> Result<jsonschema::Validator, String> {
        jsonschema::validator_for(&self.schema).map_err(|err| format!("the schema is not a valid JSON Schema: {err}"))
    }
}

/// Checks `instance` against `validator`; the error lists up to five violations with their JSON pointers.
pub fn check(validator: &jsonschema::Validator, instance: &Value) -> Result<(), String> {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|err| {
            let at = err.instance_path().to_string();
            format!("{}: {err}", if at.is_empty() { "(root)" } else { at.as_str() })
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let shown = errors.iter().take(5).cloned().collect::<Vec<_>>().join("; ");
    let more = if errors.len() > 5 { format!(" (and {} more)", errors.len() - 5) } else { String::new() };
    Err(format!("the answer does not match the schema: {shown}{more}"))
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
        assert!(SchemaSpec::from_value(&json!([1])).is_err());
        assert!(SchemaSpec::from_value(&json!({"type": "json_schema"})).is_err());
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
        assert!(err.contains("/tags/1") && err.contains("string"), "{err}");
        assert!(check(&validator, &json!({})).unwrap_err().contains("(root)"));
        let broken = SchemaSpec::from_value(&json!({"type": 5})).unwrap().unwrap();
        assert!(broken.validator().unwrap_err().contains("not a valid JSON Schema"));
    }
}

//! `FILE|JSON` arguments: inline JSON when the value starts with `{` or `[`, `-` for stdin, otherwise a file path.

use std::io::Read;

use serde_json::Value;

/// Reads and parses the argument of `flag`; errors name the flag and what to fix.
pub fn load(flag: &str, value: &str) -> Result<Value, String> {
    let (text, origin) = if value.trim_start().starts_with(['{', '[']) {
        (value.to_owned(), "the inline value".to_owned())
    } else if value == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|err| format!("{flag} -: cannot read stdin: {err}"))?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(value).map_err(|err| {
            format!("{flag} {value}: cannot read the file: {err} (inline JSON must start with '{{' or '[')")
        })?;
        (text, format!("file {value}"))
    };
    serde_json::from_str(&text).map_err(|err| format!("{flag}: {origin} is not valid JSON: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_file_and_errors() {
        assert_eq!(load("--x", r#" {"a": 1}"#).unwrap(), serde_json::json!({"a": 1}));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(load("--x", file.to_str().unwrap()).unwrap(), serde_json::json!([1, 2]));
        assert!(load("--x", "{oops").unwrap_err().contains("--x: the inline value is not valid JSON"));
        assert!(load("--x", "/no/such/file").unwrap_err().contains("cannot read the file"));
    }
}

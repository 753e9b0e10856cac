//! YAML text as a person writes it, for the emitted files (they are the project's examples, read and edited by
//! people): block style, sequences indented under their key, short scalar lists and small scalar mappings on one
//! line (`cap_drop: [ALL]`, `- {name: workspace, mountPath: /workspace}`), and comments above the keys that need
//! one. Scalars are quoted whenever a YAML 1.1 reader (PyYAML in docker-compose and kubernetes-validate, go-yaml
//! in kubectl) could read them as anything but the string: numbers, booleans, `yes`/`no`, `8080:80`.
//! `render` output parses back to the same `Value` (tested), so the serde model stays the one source.

use serde_norway::{Mapping, Value};

/// Longest line a one-line (flow) collection may make; longer ones are written in block style.
const WIDTH: usize = 118;

/// The comment (one or more lines, without `#`) above the key at `path` (mapping keys, sequence indexes as text).
pub type Comments<'a> = &'a dyn Fn(&[&str]) -> Option<String>;

/// The rendered text would not read back as the document: a value this writer does not quote correctly. Never
/// printed as a file (a file that means something else than the run is worse than none).
#[derive(Debug)]
pub struct NotRoundTrip {
    /// The text as rendered, for the bug report.
    pub text: String,
    /// The reader's error, when the text does not parse at all.
    pub parse_error: Option<String>,
}

impl std::fmt::Display for NotRoundTrip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.parse_error {
            Some(error) => {
                write!(f, "the YAML written does not parse ({error}); please report this with the options used")
            }
            None => {
                f.write_str("the YAML written reads back as other values; please report this with the options used")
            }
        }
    }
}

impl std::error::Error for NotRoundTrip {}

/// A mapping document, in block style, with the comments `comments` gives. The text is parsed back and compared
/// with the document in every build (a few milliseconds for a file people read): an error, never a wrong file.
pub fn render(document: &Value, comments: Comments<'_>) -> Result<String, NotRoundTrip> {
    let mut out = String::new();
    match document {
        Value::Mapping(mapping) => mapping_block(&mut out, mapping, 0, &mut Vec::new(), comments),
        other => out.push_str(&format!("{}\n", flow(other).unwrap_or_else(|| scalar(other, false)))),
    }
    match serde_norway::from_str::<Value>(&out) {
        Ok(back) if back == *document => Ok(out),
        Ok(_) => Err(NotRoundTrip { text: out, parse_error: None }),
        Err(error) => Err(NotRoundTrip { text: out, parse_error: Some(error.to_string()) }),
    }
}

fn mapping_block(out: &mut String, mapping: &Mapping, indent: usize, path: &mut Vec<String>, comments: Comments<'_>) {
    let pad = " ".repeat(indent);
    for (key, value) in mapping {
        let key_text = key_string(key);
        path.push(key_text.clone());
        write_comment(out, &pad, path, comments);
        let head = format!("{pad}{}:", scalar(key, false));
        // A document's top-level sections are always blocks, and so is any mapping with a comment inside.
        let flow_ok = |inner: &Mapping| indent > 0 && small_mapping(inner) && !commented_child(path, inner, comments);
        match value {
            Value::Mapping(inner) if !inner.is_empty() && !fits(&head, value, flow_ok(inner)) => {
                out.push_str(&head);
                out.push('\n');
                mapping_block(out, inner, indent + 2, path, comments);
            }
            Value::Sequence(items) if !items.is_empty() && !fits(&head, value, scalar_sequence(items)) => {
                out.push_str(&head);
                out.push('\n');
                sequence_block(out, items, indent + 2, path, comments);
            }
            _ => out.push_str(&format!("{head} {}\n", inline(value))),
        }
        path.pop();
    }
}

fn sequence_block(out: &mut String, items: &[Value], indent: usize, path: &mut Vec<String>, comments: Comments<'_>) {
    let pad = " ".repeat(indent);
    for (index, item) in items.iter().enumerate() {
        path.push(index.to_string());
        write_comment(out, &pad, path, comments);
        let dash = format!("{pad}-");
        match item {
            Value::Mapping(inner)
                if !inner.is_empty()
                    && !fits(&dash, item, all_scalars(inner.values()) && !commented_child(path, inner, comments)) =>
            {
                // The first key shares the dash's line: render the mapping two columns in, then put the dash there.
                // A comment for that key goes above the dash (it cannot sit between the dash and the key).
                let first = inner.keys().next().map(key_string).unwrap_or_default();
                let depth = path.len() + 1;
                path.push(first.clone());
                if let Some(comment) = comments(&path.iter().map(String::as_str).collect::<Vec<_>>()) {
                    comment_lines(out, &pad, &comment);
                }
                path.pop();
                let mut block = String::new();
                let rest =
                    |p: &[&str]| if p.len() == depth && p.last() == Some(&first.as_str()) { None } else { comments(p) };
                mapping_block(&mut block, inner, indent + 2, path, &rest);
                out.push_str(&dash);
                out.push_str(&block[indent + 1..]);
            }
            Value::Sequence(inner) if !inner.is_empty() && !fits(&dash, item, scalar_sequence(inner)) => {
                out.push_str(&dash);
                out.push('\n');
                sequence_block(out, inner, indent + 2, path, comments);
            }
            _ => out.push_str(&format!("{dash} {}\n", inline(item))),
        }
        path.pop();
    }
}

/// Whether a key of `mapping` (at `path`) has a comment: such a mapping cannot be written on one line.
fn commented_child(path: &[String], mapping: &Mapping, comments: Comments<'_>) -> bool {
    mapping.keys().any(|key| {
        let key = key_string(key);
        let child: Vec<&str> = path.iter().map(String::as_str).chain([key.as_str()]).collect();
        comments(&child).is_some()
    })
}

fn write_comment(out: &mut String, pad: &str, path: &[String], comments: Comments<'_>) {
    if let Some(comment) = comments(&path.iter().map(String::as_str).collect::<Vec<_>>()) {
        comment_lines(out, pad, &comment);
    }
}

fn comment_lines(out: &mut String, pad: &str, comment: &str) {
    for line in comment.lines() {
        if line.is_empty() {
            out.push_str(&format!("{pad}#\n"));
        } else {
            out.push_str(&format!("{pad}# {line}\n"));
        }
    }
}

/// Whether `value` goes on the line after `head` in flow style: allowed for its shape, and short enough.
fn fits(head: &str, value: &Value, allowed: bool) -> bool {
    allowed && flow(value).is_some_and(|text| head.len() + 1 + text.len() <= WIDTH)
}

/// A value on one line: a scalar, `{}`/`[]`, or a flow collection of scalars.
fn inline(value: &Value) -> String {
    match value {
        Value::Mapping(m) if m.is_empty() => "{}".to_owned(),
        Value::Sequence(s) if s.is_empty() => "[]".to_owned(),
        Value::Mapping(_) | Value::Sequence(_) => flow(value).expect("only flow-able collections are inlined"),
        _ => scalar(value, false),
    }
}

/// Flow style for a collection whose members are scalars (or empty collections); `None` for anything nested.
fn flow(value: &Value) -> Option<String> {
    let member = |v: &Value| match v {
        Value::Mapping(m) if m.is_empty() => Some("{}".to_owned()),
        Value::Sequence(s) if s.is_empty() => Some("[]".to_owned()),
        Value::Mapping(_) | Value::Sequence(_) | Value::Tagged(_) => None,
        _ => Some(scalar(v, true)),
    };
    match value {
        Value::Sequence(items) => {
            Some(format!("[{}]", items.iter().map(member).collect::<Option<Vec<_>>>()?.join(", ")))
        }
        Value::Mapping(mapping) => {
            let entries = mapping
                .iter()
                .map(|(k, v)| Some(format!("{}: {}", scalar(k, true), member(v)?)))
                .collect::<Option<Vec<_>>>()?;
            Some(format!("{{{}}}", entries.join(", ")))
        }
        _ => None,
    }
}

/// A list written on one line: scalars only, none of them a `a:b` pair (binds and volumes read better one a line).
fn scalar_sequence(items: &[Value]) -> bool {
    items.iter().all(|i| match i {
        Value::String(s) => !s.contains(':'),
        Value::Mapping(_) | Value::Sequence(_) | Value::Tagged(_) => false,
        _ => true,
    })
}

/// A mapping value written on one line: at most two scalar entries (`{path: /health, port: 8081}`).
fn small_mapping(mapping: &Mapping) -> bool {
    mapping.len() <= 2 && all_scalars(mapping.values())
}

fn all_scalars<'a>(mut values: impl Iterator<Item = &'a Value>) -> bool {
    values.all(|v| match v {
        Value::Mapping(m) => m.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        Value::Tagged(_) => false,
        _ => true,
    })
}

fn key_string(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        other => scalar(other, false),
    }
}

/// One scalar: plain when no reader could take it for anything else, else quoted (single quotes when that avoids
/// escaping double quotes, as in JSON values; otherwise double quotes with JSON's escapes, which YAML shares).
fn scalar(value: &Value, in_flow: bool) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if plain_safe(s, in_flow) => s.clone(),
        Value::String(s) if s.contains('"') && !s.contains('\'') && !s.chars().any(char::is_control) => {
            format!("'{s}'")
        }
        Value::String(s) => serde_json::to_string(s).expect("a string always serialises"),
        Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => flow(value).unwrap_or_else(|| "null".to_owned()),
    }
}

/// Plain only for a short alphabet, and never when the first character is a YAML indicator on its own or before
/// a space (`-`, `?`, `:`: a sequence entry, a complex key, a value) or one reserved or meaning something else
/// (`@`, `` ` ``, `=`, `!`, `&`, `*`, `#`, `|`, `>`, `%`, quotes, brackets, `,`), nor a document marker.
fn plain_safe(s: &str, in_flow: bool) -> bool {
    let Some(first) = s.chars().next() else { return false };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_./@+=-".contains(c) || (c == ':' && !in_flow);
    let indicator = "-?:,[]{}#&*!|>'\"%@`=".contains(first);
    // `-port` is plain text in YAML (a `-` starts an entry only before a space or the line's end); alone it is not.
    let dash_word = first == '-' && s.len() > 1;
    let reserved_start = (indicator && !dash_word) || s.starts_with("---") || s.starts_with("...");
    let colon_ok = !s.ends_with(':') && !s.contains(": ");
    s.chars().all(allowed) && !reserved_start && colon_ok && !looks_typed(s)
}

/// Would a YAML 1.1 or 1.2 reader resolve this plain text to a non-string (number, boolean, null, …)?
fn looks_typed(s: &str) -> bool {
    const WORDS: [&str; 15] =
        ["null", "~", "true", "false", "yes", "no", "on", "off", "y", "n", ".inf", "-.inf", "+.inf", ".nan", "<<"];
    if WORDS.iter().any(|w| w.eq_ignore_ascii_case(s)) {
        return true;
    }
    // Ints, floats, hex/octal, `1_000`, `1e3` and sexagesimal `8080:80`: a digit first (after a sign or a dot), and
    // nothing but number characters.
    let body = s.trim_start_matches(['+', '-']).trim_start_matches('.');
    let number = body.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_hexdigit() || "xXoO_:.+-".contains(c));
    // YAML 1.1 timestamps (PyYAML reads `2001-12-14t21:59:43.10-05:00` as a datetime): `YYYY-M[M]-D[D]` first.
    let date = |s: &str| {
        let mut parts = s.splitn(3, '-');
        let digits = |p: Option<&str>, n: std::ops::RangeInclusive<usize>| {
            p.is_some_and(|p| n.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
        };
        let (year, month, rest) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
        let day = rest.split(|c: char| !c.is_ascii_digit()).next();
        digits(year, 4..=4) && digits(month, 1..=2) && digits(day, 1..=2)
    };
    number || date(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_norway::from_str(text).unwrap()
    }

    #[test]
    fn scalars_are_quoted_when_a_reader_could_retype_them() {
        for typed in ["8080", "0440", "1_000", "1e3", "8080:80", "-1", ".5", "yes", "No", "on", "~", "null", ""] {
            assert!(!plain_safe(typed, false), "{typed} must be quoted");
        }
        for plain in ["exec-server", "-port", "/workspace", "./workspace", "2s", "250m", "2Gi", "sidecar-agent:latest"]
        {
            assert!(plain_safe(plain, false), "{plain} can be plain");
        }
        assert!(!plain_safe("npm-cache:/cache/npm", true), "a colon is quoted in flow context");
        assert!(!plain_safe("${SIDECAR_UID:-1000}", false) && !plain_safe("a b", false) && !plain_safe("a#b", false));
        assert!(!plain_safe("2001-12-14t21:59:43.10-05:00", false), "a YAML 1.1 timestamp");
        assert_eq!(scalar(&Value::String(r#"{"a":1}"#.into()), false), r#"'{"a":1}'"#);
        assert_eq!(scalar(&Value::String("it's \"x\"\n".into()), false), r#""it's \"x\"\n""#);
    }

    #[test]
    fn the_text_parses_back_to_the_value_with_its_comments() {
        let document = parse(
            r#"
services:
  builder:
    command: [exec-server, -port, "8080"]
    user: "${UID:-1000}:${GID:-1000}"
    volumes: ["${WORKSPACE:-.}:/workspace", "npm-cache:/cache/npm"]
    healthcheck: {test: [CMD, exec-server], interval: 2s}
    env:
      - {name: A, value: "1"}
      - {name: BUILD_SIDECARS, value: '{"node":{"internal_url":"http://127.0.0.1:8081"},"python":{"internal_url":"http://127.0.0.1:8082"}}'}
    empty: {}
    none: []
    nested: [[a, b], {x: 1}]
    mode: 288
    flag: false
"#,
        );
        let comments = |path: &[&str]| match path {
            ["services", "builder", "user"] => Some("the caller\n\nas uid:gid".to_owned()),
            ["services", "builder", "env", "1", "name"] => Some("first key of an item".to_owned()),
            _ => None,
        };
        let text = render(&document, &comments).unwrap();
        assert_eq!(parse(&text), document, "{text}");
        assert!(text.contains("    # the caller\n    #\n    # as uid:gid\n    user: \"${UID:-1000}:${GID:-1000}\"\n"));
        assert!(text.contains("    command: [exec-server, -port, \"8080\"]\n"), "{text}");
        assert!(text.contains("    volumes:\n      - \"${WORKSPACE:-.}:/workspace\"\n      - npm-cache:/cache/npm\n"));
        assert!(text.contains("      - {name: A, value: \"1\"}\n"), "{text}");
        assert!(
            text.contains("      # first key of an item\n      - name: BUILD_SIDECARS\n        value: '{"),
            "{text}"
        );
        assert!(text.contains("    empty: {}\n    none: []\n"), "{text}");
    }

    /// Indicators and typed-looking text, as keys, values, sequence items and flow members: every one reads back as
    /// the same string. (`-` was written bare: `KEY: -` did not parse and `- -` read back as `[[null]]`.)
    #[test]
    fn hostile_strings_read_back_as_themselves() {
        let hostile = [
            "-",
            "?",
            ":",
            "- x",
            "? x",
            ": x",
            "-1",
            "--",
            "---",
            "...",
            "#",
            "a #b",
            "&a",
            "*a",
            "!a",
            "!!str",
            "|",
            ">",
            "%x",
            "@x",
            "`x",
            "'",
            "\"",
            "[",
            "]",
            "{",
            "}",
            ",",
            "=",
            "<<",
            "~",
            "null",
            "Null",
            "NULL",
            "y",
            "N",
            "off",
            "0o17",
            "0x1F",
            "0b101",
            "1_000",
            ".5",
            "+.inf",
            ".NaN",
            "1:20",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "a: b",
            "a:",
            "x\ny",
            " lead",
            "trail ",
            "\t",
            "é",
            "",
        ];
        let text = |s: &str| Value::String(s.to_owned());
        let mut root = Mapping::new();
        for (i, h) in hostile.iter().enumerate() {
            root.insert(text(h), text(h));
            root.insert(text(&format!("k{i}")), Value::Sequence(vec![text(h), text("plain")]));
            root.insert(text(&format!("m{i}")), Value::Mapping([(text(h), text(h))].into_iter().collect()));
        }
        root.insert(text("all"), Value::Sequence(hostile.iter().map(|h| text(h)).collect()));
        root.insert(
            text("nested"),
            Value::Sequence(
                hostile.iter().map(|h| Value::Sequence(vec![text(h), text(&format!("{h}:{h}"))])).collect(),
            ),
        );
        let document = Value::Mapping(root);
        let rendered = render(&document, &|_| None).unwrap_or_else(|e| panic!("{e}:\n{}", e.text));
        assert_eq!(parse(&rendered), document, "{rendered}");
        assert!(rendered.contains("\"-\": \"-\"\n"), "{rendered}");
    }

    /// A document this writer cannot express as it is gets an error, not a file.
    #[test]
    fn a_text_that_does_not_read_back_is_an_error() {
        let document = parse("a: !custom x\n");
        let error = render(&document, &|_| None).unwrap_err();
        assert!(error.to_string().contains("reads back as other values"), "{error}");
        assert_eq!(error.text, "a: null\n");
    }
}

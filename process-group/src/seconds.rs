//! Durations on the command line — the grace periods, timeouts and drains of the policy — in seconds, as every
//! binary's flags take them: a decimal number (fractions allowed), from 0 to a bound the binary chooses.

use std::time::Duration;

/// Why a text is not a duration a flag takes; its Display is what clap prints after the flag's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecondsError {
    /// Not a decimal number (`5s`, `five`).
    NotANumber { text: String },
    /// A number outside 0 to `max` (negative, too large, NaN).
    OutOfRange { text: String, max: u32 },
}

impl std::fmt::Display for SecondsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotANumber { text } => write!(f, "{text:?} is not a number of seconds"),
            Self::OutOfRange { text, max } => write!(f, "{text} seconds is out of range (0 to {max})"),
        }
    }
}

impl std::error::Error for SecondsError {}

/// Parses `text` as a number of seconds from 0 to `max`.
pub fn parse_seconds(text: &str, max: u32) -> Result<Duration, SecondsError> {
    let seconds: f64 = text.trim().parse().map_err(|_| SecondsError::NotANumber { text: text.to_owned() })?;
    if !(0.0..=f64::from(max)).contains(&seconds) {
        return Err(SecondsError::OutOfRange { text: text.to_owned(), max });
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_bounds_and_messages() {
        assert_eq!(parse_seconds(" 0.25 ", 10), Ok(Duration::from_millis(250)));
        assert_eq!(parse_seconds("10", 10), Ok(Duration::from_secs(10)));
        let out_of_range = |text: &str| Err(SecondsError::OutOfRange { text: text.to_owned(), max: 10 });
        assert_eq!(parse_seconds("10.5", 10), out_of_range("10.5"));
        assert_eq!(parse_seconds("-1", 10), out_of_range("-1"));
        assert_eq!(parse_seconds("NaN", 10), out_of_range("NaN"));
        assert_eq!(parse_seconds("5s", 10), Err(SecondsError::NotANumber { text: "5s".to_owned() }));
        assert_eq!(parse_seconds("10.5", 10).unwrap_err().to_string(), "10.5 seconds is out of range (0 to 10)");
        assert_eq!(parse_seconds("5s", 10).unwrap_err().to_string(), "\"5s\" is not a number of seconds");
    }
}

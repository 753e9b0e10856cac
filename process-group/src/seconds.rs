//! Durations on the command line — the grace periods, timeouts and drains of the policy — in seconds, as every
//! binary's flags take them: a decimal number (fractions allowed), from 0 to a bound the binary chooses.

use std::time::Duration;

/// Parses `text` as a number of seconds from 0 to `max`; the error names the text, or the range it left.
pub fn parse_seconds(text: &str, max: u32) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.0..=f64::from(max)).contains(&seconds) {
        return Err(format!("{text} seconds is out of range (0 to {max})"));
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
        assert_eq!(parse_seconds("10.5", 10), Err("10.5 seconds is out of range (0 to 10)".to_owned()));
        assert_eq!(parse_seconds("-1", 10), Err("-1 seconds is out of range (0 to 10)".to_owned()));
        assert_eq!(parse_seconds("NaN", 10), Err("NaN seconds is out of range (0 to 10)".to_owned()));
        assert_eq!(parse_seconds("5s", 10), Err("\"5s\" is not a number of seconds".to_owned()));
    }
}

//! `5s`, `300ms`, `1.5s`, `250us` or a bare number of seconds.

use std::time::Duration;

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale_s) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("not a duration: {text:?} (e.g. 5s, 300ms)"))?;
    if !value.is_finite() || value <= 0.0 || value * scale_s > 86_400.0 {
        return Err(format!("duration out of range (0, 1 day]: {text:?}"));
    }
    Ok(Duration::from_secs_f64(value * scale_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}

//! Exact decimals for conditions on `number` parameters (spec §2): a literal such as `0.5` or `10`, and a
//! JSON number argument read as the decimal it stands for, compared exactly, never through `f64` rounding.
//!
//! **What an argument's value is.** serde_json (without `arbitrary_precision`) holds a JSON number as a
//! `u64`, an `i64` or an `f64`. An integer is its exact value. A fraction, or an integer written with a
//! point or an exponent (`10.0`, `1e3`), arrives as an `f64`; its value for a comparison is the **shortest
//! decimal that reads back as that same `f64`** — the number serde_json writes when it serializes the
//! argument again (its `ryu` output), so a decision agrees with the call as recorded. For any argument
//! written with at most 15 significant digits that is exactly the value of the JSON text (`0.1` is 0.1, not
//! 0.1000000000000000055…); a longer argument is compared as the `f64` it was read as (`0.10000000000000001`
//! reads as the same `f64` as `0.1`, so it equals `0.1`).

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An exact decimal number: `±digits × 10^exponent`, normalized so that equal values are equal structs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    /// Below zero (never for zero itself).
    negative: bool,
    /// The significant digits, ASCII, without leading or trailing zeros; empty for zero.
    digits: String,
    /// The power of ten the digits are scaled by (0 for zero).
    exponent: i64,
}

impl Decimal {
    /// Parses a decimal written as in sources: an optional `-`, digits, and optionally a point and digits
    /// (`10`, `-0.5`, `2.75`, `010.50`). `None` for anything else (no exponent, no `+`, no bare point).
    pub fn parse(text: &str) -> Option<Decimal> {
        parse_parts(text, Exponent::Refused)
    }

    /// The exact value of a JSON number as conditions read it (the module's rule): an integer exactly, an
    /// `f64` as the shortest decimal that reads back as it. `None` only for a non-finite `f64`, which
    /// serde_json never holds.
    pub fn from_json(n: &serde_json::Number) -> Option<Decimal> {
        if let Some(u) = n.as_u64() {
            return parse_parts(&u.to_string(), Exponent::Refused);
        }
        if let Some(i) = n.as_i64() {
            return parse_parts(&i.to_string(), Exponent::Refused);
        }
        let f = n.as_f64().filter(|f| f.is_finite())?;
        // `{:e}` prints the shortest digits that round-trip (`1e-1`, `1.2345e3`, `0e0`, `-0e0`).
        parse_parts(&format!("{f:e}"), Exponent::Allowed)
    }

    /// The same value from a whole number.
    pub fn from_i64(n: i64) -> Decimal {
        // INVARIANT: an `i64` prints as an optional `-` and digits, which `parse_parts` accepts.
        parse_parts(&n.to_string(), Exponent::Refused).unwrap_or_else(Decimal::zero)
    }

    fn zero() -> Decimal {
        Decimal { negative: false, digits: String::new(), exponent: 0 }
    }

    /// The position of the most significant digit: the number of digits before the point (`12.5` → 2,
    /// `0.05` → -1). Only for a non-zero value.
    fn scale(&self) -> i64 {
        self.digits.len() as i64 + self.exponent
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Exponent {
    Refused,
    Allowed,
}

/// The largest exponent accepted in `{:e}` output; an `f64`'s lies within ±324.
const MAX_EXPONENT: i64 = 1_000;

fn parse_parts(text: &str, exponent: Exponent) -> Option<Decimal> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, power) = match rest.split_once(['e', 'E']) {
        Some((m, p)) if exponent == Exponent::Allowed => {
            let p = p.strip_prefix('+').unwrap_or(p);
            let (minus, digits) = match p.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, p),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 6 {
                return None;
            }
            let n: i64 = digits.parse().ok()?;
            if n > MAX_EXPONENT {
                return None;
            }
            (m, if minus { -n } else { n })
        }
        Some(_) => return None,
        None => (rest, 0),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, f),
        None => (mantissa, ""),
    };
    let is_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !is_digits(whole) || !is_digits(fraction) || (mantissa.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let all = format!("{whole}{fraction}");
    let significant = all.trim_start_matches('0');
    let trimmed = significant.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some(Decimal::zero());
    }
    let trailing = (significant.len() - trimmed.len()) as i64;
    let exponent = power.checked_sub(fraction.len() as i64)?.checked_add(trailing)?;
    Some(Decimal { negative, digits: trimmed.to_string(), exponent })
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        let sign = |d: &Decimal| match (d.digits.is_empty(), d.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        };
        let (a, b) = (sign(self), sign(other));
        if a != b || a == 0 {
            return a.cmp(&b);
        }
        // Same sign, both non-zero: compare magnitudes, most significant digit first. With equal scales the
        // digit strings are aligned at their first digit, and neither ends in a zero, so byte order is value
        // order (a proper prefix is the smaller).
        let magnitude =
            self.scale().cmp(&other.scale()).then_with(|| self.digits.as_bytes().cmp(other.digits.as_bytes()));
        if a < 0 { magnitude.reverse() } else { magnitude }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The canonical text: plain positional notation, no exponent, no leading or trailing zeros (`2.75`, `-0.5`,
/// `1000`, `0`). [`Decimal::parse`] reads it back to the same value.
impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.digits.is_empty() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let scale = self.scale();
        if self.exponent >= 0 {
            f.write_str(&self.digits)?;
            for _ in 0..self.exponent {
                f.write_str("0")?;
            }
            Ok(())
        } else if scale > 0 {
            let (whole, fraction) = self.digits.split_at(scale as usize);
            write!(f, "{whole}.{fraction}")
        } else {
            f.write_str("0.")?;
            for _ in 0..-scale {
                f.write_str("0")?;
            }
            f.write_str(&self.digits)
        }
    }
}

/// In the table, a decimal is its canonical text, a JSON string (`"2.75"`): the table's canonical JSON holds
/// integers only, and a string keeps every digit.
impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Only the canonical text is read back, so one value has one spelling in a table (and one digest).
impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let text = String::deserialize(d)?;
        match Decimal::parse(&text) {
            Some(n) if n.to_string() == text => Ok(n),
            Some(n) => Err(serde::de::Error::custom(format!("the decimal `{text}` is not in canonical form (`{n}`)"))),
            None => Err(serde::de::Error::custom(format!("`{text}` is not a decimal"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text).unwrap_or_else(|| panic!("`{text}` parses"))
    }

    fn arg(v: serde_json::Value) -> Decimal {
        match v {
            serde_json::Value::Number(n) => Decimal::from_json(&n).expect("finite"),
            other => panic!("not a number: {other}"),
        }
    }

    #[test]
    fn parsing_normalizes_and_prints_canonically() {
        for (text, canonical) in [
            ("10", "10"),
            ("10.0", "10"),
            ("010.500", "10.5"),
            ("0.5", "0.5"),
            ("-0.5", "-0.5"),
            ("-0", "0"),
            ("-0.000", "0"),
            ("2.75", "2.75"),
            ("1000", "1000"),
            ("0.001", "0.001"),
            ("123456789012345678901234567890.5", "123456789012345678901234567890.5"),
        ] {
            assert_eq!(d(text).to_string(), canonical, "{text}");
        }
        for bad in ["", "-", ".5", "5.", "1e3", "+1", "1.2.3", "1_0", " 1", "0x10", "١"] {
            assert_eq!(Decimal::parse(bad), None, "{bad:?}");
        }
        assert_eq!(d("10"), d("10.000"));
        assert_eq!(Decimal::from_i64(i64::MIN).to_string(), i64::MIN.to_string());
    }

    #[test]
    fn comparison_is_exact() {
        let ordered = [
            "-1000",
            "-10.5",
            "-10",
            "-9.99",
            "-0.5",
            "-0.05",
            "0",
            "0.05",
            "0.1",
            "0.5",
            "9.99",
            "10",
            "10.000001",
            "10.5",
            "1000",
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(d(a).cmp(&d(b)), i.cmp(&j), "{a} vs {b}");
            }
        }
        assert_eq!(d("10").cmp(&d("10.0")), Ordering::Equal);
        assert_eq!(d("0.1").cmp(&d("0.10000000000000000000000001")), Ordering::Less);
    }

    /// The module's rule for arguments: integers exactly, an `f64` as its shortest round-trip decimal.
    #[test]
    fn json_arguments_read_as_their_decimal() {
        assert_eq!(arg(json!(10)), d("10"));
        assert_eq!(arg(json!(10.0)), d("10"));
        assert_eq!(arg(json!(0.1)), d("0.1"));
        assert_eq!(arg(json!(-2.5)), d("-2.5"));
        assert_eq!(arg(json!(-0.0)), d("0"));
        assert_eq!(arg(json!(u64::MAX)), d("18446744073709551615"));
        assert_eq!(arg(json!(i64::MIN)), d("-9223372036854775808"));
        // Through serde_json's parser, as a call's arguments arrive.
        let parsed = |text: &str| arg(serde_json::from_str(text).expect("json"));
        assert_eq!(parsed("1e3"), d("1000"));
        assert_eq!(parsed("1E-2"), d("0.01"));
        assert_eq!(parsed("10.000001"), d("10.000001"));
        assert_eq!(parsed("0.30000000000000004"), d("0.30000000000000004"));
        assert_eq!(parsed("18446744073709551616"), d("18446744073709552000"));
        assert!(parsed("10.000001") > d("10"));
        assert!(parsed("1e308") > d("1000"));
        assert!(parsed("5e-324") > d("0"));
    }

    #[test]
    fn the_table_holds_the_canonical_text_only() {
        assert_eq!(serde_json::to_value(d("010.50")).ok(), Some(json!("10.5")));
        assert_eq!(serde_json::from_value::<Decimal>(json!("-0.5")).ok(), Some(d("-0.5")));
        assert!(serde_json::from_value::<Decimal>(json!("10.50")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!("1e3")).is_err());
        assert!(serde_json::from_value::<Decimal>(json!(10)).is_err());
    }
}

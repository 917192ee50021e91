//! JSON output goes through serde/serde_json; this module holds the one
//! thing serde_json does differently from what tunbench-link has always
//! printed (and the Python side parses): floats.
//!
//! serde_json writes `0.0`, `1.0` and `1e-6`; tunbench-link writes floats as
//! Rust's `Display` does (`0`, `1`, `0.000001`: never an exponent), so a
//! whole number stays a JSON integer for readers that care (Python's `json`
//! gives `int`). [`Float`] keeps that format.

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// A float written as `Display` writes it; `null` when not finite.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Float(pub f64);

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.0.is_finite() {
            return s.serialize_none();
        }
        // `Display` of a finite f64 is always a valid JSON number.
        RawValue::from_string(self.0.to_string())
            .map_err(S::Error::custom)?
            .serialize(s)
    }
}

/// Serialize a value whose every field is plain data (no maps with non-string
/// keys), which cannot fail.
pub fn to_string<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("tunbench-link's JSON values always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample<'a> {
        a: &'a str,
        b: u64,
        c: Float,
        d: Option<u64>,
        e: Float,
        f: Float,
        g: Float,
    }

    /// Pins the formats the stats and check output rely on: key order,
    /// compact separators, escaping, and floats without `.0` or exponents.
    #[test]
    fn shape_and_number_format() {
        let j = to_string(&Sample {
            a: "x\"y\n\u{1}",
            b: 3,
            c: Float(0.5),
            d: None,
            e: Float(2.0),
            f: Float(1e-6),
            g: Float(f64::NAN),
        });
        assert_eq!(
            j,
            r#"{"a":"x\"y\n\u0001","b":3,"c":0.5,"d":null,"e":2,"f":0.000001,"g":null}"#
        );
    }
}

//! Minimal JSON writing (the output is small and flat; no serde needed).

use std::fmt::Write;

/// Builds one JSON object, keys in insertion order.
#[derive(Debug, Default)]
pub struct Obj {
    s: String,
}

impl Obj {
    pub fn new() -> Self {
        Obj::default()
    }

    fn key(&mut self, k: &str) {
        self.s.push(if self.s.is_empty() { '{' } else { ',' });
        push_str(&mut self.s, k);
        self.s.push(':');
    }

    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k);
        push_str(&mut self.s, v);
        self
    }
    pub fn u64(mut self, k: &str, v: u64) -> Self {
        self.key(k);
        let _ = write!(self.s, "{v}");
        self
    }
    pub fn f64(mut self, k: &str, v: f64) -> Self {
        self.key(k);
        if v.is_finite() {
            let _ = write!(self.s, "{v}");
        } else {
            self.s.push_str("null");
        }
        self
    }
    pub fn null(mut self, k: &str) -> Self {
        self.key(k);
        self.s.push_str("null");
        self
    }
    /// Insert already-serialized JSON.
    pub fn raw(mut self, k: &str, json: &str) -> Self {
        self.key(k);
        self.s.push_str(json);
        self
    }
    pub fn opt_u64(self, k: &str, v: Option<u64>) -> Self {
        match v {
            Some(v) => self.u64(k, v),
            None => self.null(k),
        }
    }
    pub fn opt_f64(self, k: &str, v: Option<f64>) -> Self {
        match v {
            Some(v) => self.f64(k, v),
            None => self.null(k),
        }
    }
    pub fn finish(mut self) -> String {
        if self.s.is_empty() {
            self.s.push('{');
        }
        self.s.push('}');
        self.s
    }
}

pub fn push_str(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_and_escaping() {
        let j = Obj::new()
            .str("a", "x\"y\n")
            .u64("b", 3)
            .f64("c", 0.5)
            .null("d")
            .raw("e", "{}")
            .finish();
        assert_eq!(j, r#"{"a":"x\"y\n","b":3,"c":0.5,"d":null,"e":{}}"#);
        assert_eq!(Obj::new().finish(), "{}");
    }
}

//! Normalization: an extracted [`Answer`] becomes the key it votes under.

use serde_json::Value;

use super::Answer;

/// Turns an [`Answer`] into the string it votes under, so that answers that mean the same
/// thing agree. Each step is switched on or off; those on run in this fixed order:
///
/// 1. **Canonical JSON** (default on). A JSON answer that is an object, array, number,
///    boolean or null becomes its [canonical text](canonical_json) (object keys sorted, no
///    whitespace, numbers in [numeric canonical form](canonical_number)). A JSON *string*
///    becomes its value, not its quoted text: `{"answer": "yes"}` under `/answer` and the
///    regex answer `yes` agree, and so do the JSON string `"42"` and the number `42`. A
///    text answer that, trimmed, starts with `{`, `[` or `"` and parses as JSON is treated
///    the same way (a regex that captured `"yes"` with its quotes votes `yes`). Off, a JSON
///    answer is its compact JSON text in document order (a string keeps its quotes).
/// 2. **Trim** (default on): leading and trailing whitespace goes.
/// 3. **Case fold** (default off): Unicode lowercase ([`str::to_lowercase`], not full case
///    folding: `ß` stays `ß`). It also lowercases the keys of canonical JSON.
/// 4. **Numeric** (default on): text that is one decimal number (surrounding whitespace
///    allowed) becomes its [canonical form](canonical_number), so `42`, `42.0`, `4.2e1`
///    and ` +42 ` agree; anything else is unchanged.
///
/// ```
/// use stencil_runtime::select::{Answer, Normalizer};
///
/// let n = Normalizer::default();
/// let key = |a: &str| n.normalize(&Answer::Text(a.into()));
/// assert_eq!(key(" +42 "), key("4.2e1"));
/// assert_eq!(key("42.0"), "42");
/// assert_eq!(n.normalize(&Answer::Json(serde_json::json!("Yes"))), "Yes");
/// assert_eq!(n.with_case_fold(true).normalize(&Answer::Json(serde_json::json!("Yes"))), "yes");
/// assert_eq!(n.normalize(&Answer::Json(serde_json::json!({"b": 1.0, "a": [true]}))), r#"{"a":[true],"b":1}"#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Normalizer {
    canonical_json: bool,
    trim: bool,
    case_fold: bool,
    numeric: bool,
}

impl Default for Normalizer {
    /// Canonical JSON, trim and numeric on; case fold off.
    fn default() -> Self {
        Normalizer { canonical_json: true, trim: true, case_fold: false, numeric: true }
    }
}

impl Normalizer {
    /// Every step off: a text answer is its text exactly, a JSON answer its compact text.
    pub const fn none() -> Self {
        Normalizer { canonical_json: false, trim: false, case_fold: false, numeric: false }
    }

    /// Switches the canonical JSON step.
    pub const fn with_canonical_json(mut self, on: bool) -> Self {
        self.canonical_json = on;
        self
    }

    /// Switches trimming.
    pub const fn with_trim(mut self, on: bool) -> Self {
        self.trim = on;
        self
    }

    /// Switches case folding.
    pub const fn with_case_fold(mut self, on: bool) -> Self {
        self.case_fold = on;
        self
    }

    /// Switches the numeric canonical form.
    pub const fn with_numeric(mut self, on: bool) -> Self {
        self.numeric = on;
        self
    }

    /// Whether the canonical JSON step is on.
    pub const fn canonical_json(&self) -> bool {
        self.canonical_json
    }

    /// Whether trimming is on.
    pub const fn trim(&self) -> bool {
        self.trim
    }

    /// Whether case folding is on.
    pub const fn case_fold(&self) -> bool {
        self.case_fold
    }

    /// Whether the numeric canonical form is on.
    pub const fn numeric(&self) -> bool {
        self.numeric
    }

    /// The normalized text of `answer` (possibly empty).
    pub fn normalize(&self, answer: &Answer) -> String {
        let mut text = match answer {
            Answer::Json(value) => self.json_text(value),
            Answer::Text(text) => match self.canonical_json.then(|| parse_json_like(text)).flatten() {
                Some(value) => self.json_text(&value),
                None => text.clone(),
            },
        };
        if self.trim {
            let trimmed = text.trim();
            if trimmed.len() != text.len() {
                text = trimmed.to_string();
            }
        }
        if self.case_fold {
            text = text.to_lowercase();
        }
        if self.numeric {
            if let Some(number) = canonical_number(&text) {
                text = number;
            }
        }
        text
    }

    /// The vote key of `answer`: [`Normalizer::normalize`], except that an answer that
    /// normalizes to the empty string abstains (`None`), as one that could not be
    /// extracted does.
    pub fn key(&self, answer: &Answer) -> Option<String> {
        Some(self.normalize(answer)).filter(|key| !key.is_empty())
    }

    fn json_text(&self, value: &Value) -> String {
        match value {
            Value::String(s) if self.canonical_json => s.clone(),
            _ if self.canonical_json => canonical_json(value),
            _ => value.to_string(),
        }
    }
}

/// Text that looks like a JSON string, object or array and parses as one.
fn parse_json_like(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with(['{', '[', '"']) {
        return None;
    }
    serde_json::from_str(trimmed).ok()
}

/// The canonical JSON text of `value`: no whitespace, object keys sorted (by code point),
/// numbers in [`canonical_number`] form, strings escaped as `serde_json` escapes them.
///
/// ```
/// use serde_json::json;
/// use stencil_runtime::select::canonical_json;
///
/// assert_eq!(canonical_json(&json!({"z": 2.50, "a": {"y": null, "x": "é"}})), r#"{"a":{"x":"é","y":null},"z":2.5}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) => out.push_str(&value.to_string()),
        Value::Number(n) => {
            let text = n.to_string();
            out.push_str(&canonical_number(&text).unwrap_or(text));
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut members: Vec<(&String, &Value)> = members.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    // Serializing a `str` cannot fail; the fallback only avoids an `unwrap`.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Largest number of digits (significant digits plus zeros) written out before scientific
/// notation takes over, as JavaScript's `Number.prototype.toString` does.
const MAX_PLAIN_INTEGER_DIGITS: i64 = 21;
/// Smallest (most negative) decimal exponent written as `0.000…` (`1e-6` is `0.000001`,
/// `1e-7` stays scientific), again as JavaScript does.
const MIN_PLAIN_POINT: i64 = -5;

/// The canonical form of a decimal number, or `None` when `text` (trimmed) is not one.
///
/// Accepted: an optional sign, digits with an optional `.` and fraction (at least one
/// digit on either side of the point: `5.`, `.5`), an optional exponent `e`/`E` with an
/// optional sign. Not numbers: `inf`, `NaN`, hexadecimal, digit separators, units.
///
/// The value is exact (no floating point): the form is the shortest decimal without
/// trailing zeros, `-` only when not zero, written out in full up to 21 integer digits and
/// down to `0.000001`, and otherwise as `d.ddde±x` with the exponent in plain digits
/// (`1e21`, `1.5e-7`). Exponents of more than 18 digits are not canonicalized.
///
/// ```
/// use stencil_runtime::select::canonical_number;
///
/// for same in ["42", "42.0", "4.2e1", " +42 ", "0042", "420e-1", "4.2E+1"] {
///     assert_eq!(canonical_number(same).as_deref(), Some("42"));
/// }
/// assert_eq!(canonical_number("-0.50").as_deref(), Some("-0.5"));
/// assert_eq!(canonical_number("-0.0").as_deref(), Some("0"));
/// assert_eq!(canonical_number("1e400").as_deref(), Some("1e400"));
/// assert_eq!(canonical_number("42 apples"), None);
/// ```
pub fn canonical_number(text: &str) -> Option<String> {
    let text = text.trim();
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let (int, frac) = match mantissa.find('.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let (sign, digits) = match e.as_bytes().first()? {
                b'-' => (-1, &e[1..]),
                b'+' => (1, &e[1..]),
                _ => (1, e),
            };
            if digits.is_empty() || !all_digits(digits) {
                return None;
            }
            let digits = digits.trim_start_matches('0');
            if digits.len() > 18 {
                return None;
            }
            sign * digits.parse::<i64>().unwrap_or(0)
        }
    };
    // value = digits × 10^power
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Some("0".to_string());
    }
    let trailing_zeros = i64::try_from(digits.len() - significant.len()).ok()?;
    let power = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?.checked_add(trailing_zeros)?;
    let n = i64::try_from(significant.len()).ok()?;
    // The decimal point sits after `point` significant digits (before them if negative).
    let point = n.checked_add(power)?;
    let mut out = String::with_capacity(significant.len() + 24);
    if negative {
        out.push('-');
    }
    if power >= 0 && point <= MAX_PLAIN_INTEGER_DIGITS {
        out.push_str(significant);
        out.extend(std::iter::repeat('0').take(power as usize));
    } else if power < 0 && point > 0 {
        let (whole, fraction) = significant.split_at(point as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else if power < 0 && point >= MIN_PLAIN_POINT {
        out.push_str("0.");
        out.extend(std::iter::repeat('0').take((-point) as usize));
        out.push_str(significant);
    } else {
        let (first, others) = significant.split_at(1);
        out.push_str(first);
        if !others.is_empty() {
            out.push('.');
            out.push_str(others);
        }
        out.push('e');
        out.push_str(&(point - 1).to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(s: &str) -> Answer {
        Answer::Text(s.to_string())
    }

    #[test]
    fn numeric_forms_of_one_value_agree() {
        let n = Normalizer::default();
        for same in ["42", "42.0", "4.2e1", " +42 ", "+42", "42.", "0042.000", "4200e-2", "0.42E2", "4.2e+01", "\t42\n"]
        {
            assert_eq!(n.normalize(&text(same)), "42", "{same:?}");
        }
        for (input, expected) in [
            ("-0", "0"),
            ("+0.000e5", "0"),
            (".5", "0.5"),
            ("-.50", "-0.5"),
            ("3.14159", "3.14159"),
            ("-12.3400", "-12.34"),
            ("1e3", "1000"),
            ("100", "100"),
            ("1.5e-7", "1.5e-7"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1e-7"),
            ("123456789012345678901", "123456789012345678901"),
            ("1234567890123456789012", "1.234567890123456789012e21"),
            ("1e21", "1e21"),
            ("1e20", "100000000000000000000"),
            ("12e-1", "1.2"),
            ("1e400", "1e400"),
            ("-2.5E-400", "-2.5e-400"),
            ("1e000000000000000000000007", "10000000"),
            ("1e999999999999999999", "1e999999999999999999"),
        ] {
            assert_eq!(canonical_number(input).as_deref(), Some(expected), "{input:?}");
        }
        // Exact, not floating point: these differ although they are the same f64.
        assert_ne!(canonical_number("0.30000000000000004"), canonical_number("0.3"));
        assert_ne!(canonical_number("9007199254740993"), canonical_number("9007199254740992"));
    }

    #[test]
    fn non_numbers_are_unchanged() {
        let n = Normalizer::default();
        for other in [
            "42 apples",
            "0x2A",
            "inf",
            "NaN",
            "1,000",
            "1_000",
            "e5",
            "1e",
            "1e+",
            "-",
            "+",
            ".",
            "..5",
            "1.2.3",
            "4 2",
            "--4",
            "1e1.5",
            "$42",
            "42%",
            "١٢",
            "1e9999999999999999999",
        ] {
            assert_eq!(canonical_number(other), None, "{other:?}");
            assert_eq!(n.normalize(&text(other)), other.trim(), "{other:?}");
        }
        // Huge exponents stay short (no string of a billion zeros).
        assert_eq!(canonical_number("5e-999999999999999999").as_deref(), Some("5e-999999999999999999"));
        assert_eq!(canonical_number("0.5e-999999999999999999").as_deref(), Some("5e-1000000000000000000"));
        assert_eq!(canonical_number("5e999999999").as_deref(), Some("5e999999999"));
    }

    #[test]
    fn numeric_and_trim_can_be_switched_off() {
        let plain = Normalizer::none();
        assert_eq!(plain.normalize(&text(" 42.0 ")), " 42.0 ");
        assert_eq!(plain.with_trim(true).normalize(&text(" 42.0 ")), "42.0");
        assert_eq!(plain.with_numeric(true).normalize(&text(" 42.0 ")), "42");
        assert_eq!(Normalizer::default().with_numeric(false).normalize(&text(" 42.0 ")), "42.0");
    }

    #[test]
    fn case_fold_is_off_by_default() {
        let n = Normalizer::default();
        assert!(!n.case_fold() && n.trim() && n.numeric() && n.canonical_json());
        assert_eq!(n.normalize(&text(" Yes ")), "Yes");
        assert_eq!(n.with_case_fold(true).normalize(&text(" Yes ")), "yes");
        assert_eq!(n.with_case_fold(true).normalize(&text("ÉTÉ")), "été");
        assert_eq!(n.with_case_fold(true).normalize(&text("4.2E1")), "42");
    }

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let n = Normalizer::default();
        let a = n.normalize(&Answer::Json(json!({"b": [1, 2.0, {"y": 1, "x": 2}], "a": "s"})));
        assert_eq!(a, r#"{"a":"s","b":[1,2,{"x":2,"y":1}]}"#);
        // The same object written another way, as text, gives the same key.
        let b = n.normalize(&text(" {\"a\" : \"s\",\n \"b\": [1.0, 2, {\"x\": 2e0, \"y\": 1}]} "));
        assert_eq!(a, b);
        // Escapes inside strings survive.
        assert_eq!(n.normalize(&Answer::Json(json!(["a\"b\n", null, false]))), r#"["a\"b\n",null,false]"#);
        // Text that looks like JSON but is not stays text.
        assert_eq!(n.normalize(&text("{not json}")), "{not json}");
        // Off: document order and quotes kept.
        let off = Normalizer::default().with_canonical_json(false);
        assert_eq!(off.normalize(&Answer::Json(json!("yes"))), "\"yes\"");
        assert_eq!(off.normalize(&text("\"yes\"")), "\"yes\"");
    }

    #[test]
    fn a_json_string_votes_as_its_value() {
        let n = Normalizer::default();
        let from_json = n.normalize(&Answer::Json(json!(" yes")));
        let from_regex = n.normalize(&text("yes"));
        let quoted = n.normalize(&text("\"yes\""));
        assert_eq!(from_json, "yes");
        assert_eq!(from_regex, "yes");
        assert_eq!(quoted, "yes");
        // A JSON string of a number agrees with the number.
        assert_eq!(n.normalize(&Answer::Json(json!("42.0"))), n.normalize(&Answer::Json(json!(42))));
        assert_eq!(n.normalize(&Answer::Json(json!(4.2e1))), "42");
        assert_eq!(n.normalize(&Answer::Json(json!(true))), "true");
        assert_eq!(n.normalize(&Answer::Json(json!(null))), "null");
    }

    #[test]
    fn empty_answers_abstain() {
        let n = Normalizer::default();
        assert_eq!(n.key(&text("  ")), None);
        assert_eq!(n.key(&Answer::Json(json!(""))), None);
        assert_eq!(n.key(&text(" 7 ")), Some("7".to_string()));
        assert_eq!(Normalizer::none().key(&text("  ")), Some("  ".to_string()));
    }
}

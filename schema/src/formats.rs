//! `format` values as regular expressions over the decoded string (`regex-syntax` syntax,
//! full match). Their syntax trees are parsed once per process (`format_hir`): the
//! regexes are constants, and schemas name a format in many places.

use regex_syntax::hir::Hir;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

const DATE: &str = r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";
// Leap seconds (`:60`) are refused: they are valid only at 23:59 UTC.
const TIME: &str =
    r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))";
const DEC_OCTET: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])";
const UNRESERVED: &str = r"[A-Za-z0-9\-._~]";
const PCT: &str = r"%[0-9A-Fa-f]{2}";
const SUB_DELIMS: &str = r"[!$&'()*+,;=]";

fn ipv6() -> String {
    let h = "[0-9A-Fa-f]{1,4}";
    let ls32 = format!("(?:{h}:{h}|{v4})", v4 = ipv4());
    let alts = [
        format!("(?:{h}:){{6}}{ls32}"),
        format!("::(?:{h}:){{5}}{ls32}"),
        format!("(?:{h})?::(?:{h}:){{4}}{ls32}"),
        format!("(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{ls32}"),
        format!("(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{ls32}"),
        format!("(?:(?:{h}:){{0,3}}{h})?::{h}:{ls32}"),
        format!("(?:(?:{h}:){{0,4}}{h})?::{ls32}"),
        format!("(?:(?:{h}:){{0,5}}{h})?::{h}"),
        format!("(?:(?:{h}:){{0,6}}{h})?::"),
    ];
    format!("(?:{})", alts.join("|"))
}

fn ipv4() -> String {
    format!("(?:{DEC_OCTET}\\.{DEC_OCTET}\\.{DEC_OCTET}\\.{DEC_OCTET})")
}

/// A label of at most `max` characters (≥ 5), letters, digits and inner hyphens, without
/// `--` at positions 3–4 (reserved for IDNA's `xn--`, whose Punycode a regex cannot check).
fn label(max: usize) -> String {
    let a = "[A-Za-z0-9]";
    let m = "[A-Za-z0-9-]";
    format!("(?:{a}|{a}{a}|{a}{m}{a}|{a}{m}{m}{a}|{a}{m}(?:{a}{m}|-{a}){m}{{0,{}}}{a})", max - 5)
}

fn hostname() -> String {
    // At most 253 characters overall: a first label of up to 63, then at most six of up to
    // 26 (225 in all). Narrower than RFC 1123, never wider.
    format!("(?:{}(?:\\.{}){{0,6}})", label(63), label(26))
}

fn uri_parts() -> (String, String, String) {
    let pchar = format!("(?:{UNRESERVED}|{PCT}|{SUB_DELIMS}|[:@])");
    let query = format!("(?:{pchar}|[/?])*");
    let userinfo = format!("(?:(?:{UNRESERVED}|{PCT}|{SUB_DELIMS}|:)*@)?");
    let reg_name = format!("(?:{UNRESERVED}|{PCT}|{SUB_DELIMS})*");
    let host = format!("(?:\\[{}\\]|{}|{reg_name})", ipv6(), ipv4());
    let authority = format!("{userinfo}{host}(?::[0-9]*)?");
    let segment = format!("{pchar}*");
    let segment_nz = format!("{pchar}+");
    let hier =
        format!("(?://{authority}(?:/{segment})*|/(?:{segment_nz}(?:/{segment})*)?|{segment_nz}(?:/{segment})*|)");
    let segment_nz_nc = format!("(?:{UNRESERVED}|{PCT}|{SUB_DELIMS}|@)+");
    let relative =
        format!("(?://{authority}(?:/{segment})*|/(?:{segment_nz}(?:/{segment})*)?|{segment_nz_nc}(?:/{segment})*|)");
    (hier, query, relative)
}

/// The regex (full match, over the decoded string) for a known `format`, or None.
///
/// ```
/// let re = stencil_schema::format_regex("date").unwrap();
/// let re = regex_automata::meta::Regex::new(&format!("^(?:{re})$")).unwrap();
/// assert!(re.is_match("2024-02-29") && !re.is_match("2023-02-29"));
/// ```
pub fn format_regex(format: &str) -> Option<String> {
    Some(match format {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        "date-time" => format!("{DATE}[Tt]{TIME}"),
        "duration" => {
            let t = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
            let d = format!(r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:{t})?");
            format!(r"P(?:{d}|{t}|[0-9]+W)")
        }
        "email" => {
            // The local part is at most 64 characters (as validators check): any run of up
            // to 64 atom characters, or dotted atoms of at most 63 characters. Narrower
            // than RFC 5321 for long dotted local parts, never wider.
            let c = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
            let local = format!(r"(?:{c}{{1,64}}|{c}(?:\.?{c}){{0,31}})");
            format!(r"{local}@(?:{}|\[{}\]|\[IPv6:{}\])", hostname(), ipv4(), ipv6())
        }
        "hostname" => hostname(),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "uuid" => r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}".to_string(),
        "uri" => {
            let (hier, query, _) = uri_parts();
            format!(r"[A-Za-z][A-Za-z0-9+\-.]*:{hier}(?:\?{query})?(?:#{query})?")
        }
        "uri-reference" => {
            let (hier, query, rel) = uri_parts();
            format!(r"(?:[A-Za-z][A-Za-z0-9+\-.]*:{hier}|{rel})(?:\?{query})?(?:#{query})?")
        }
        "json-pointer" => r"(?:/(?:[^~/]|~[01])*)*".to_string(),
        "relative-json-pointer" => r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)".to_string(),
        _ => return None,
    })
}

/// [`format_regex`]'s syntax tree, or None for an unknown format. Parsed once per process:
/// the regexes are constants (a `uri` is 2 KB of regex), and schemas name a format in many
/// places.
pub(crate) fn format_hir(format: &str) -> Option<Arc<Hir>> {
    static PARSED: LazyLock<Mutex<HashMap<String, Arc<Hir>>>> = LazyLock::new(Default::default);
    let parsed = || PARSED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hir) = parsed().get(format) {
        return Some(hir.clone());
    }
    let re = format_regex(format)?;
    let hir = Arc::new(regex_syntax::ParserBuilder::new().build().parse(&re).expect("format regexes parse"));
    Some(parsed().entry(format.to_string()).or_insert(hir).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(format: &str, good: &[&str], bad: &[&str]) {
        let re = regex_automata::meta::Regex::new(&format!("^(?:{})$", format_regex(format).unwrap())).unwrap();
        // The remembered tree is the regex's, the second time too.
        for _ in 0..2 {
            let parsed = regex_syntax::parse(&format_regex(format).unwrap()).unwrap();
            assert_eq!(format_hir(format).unwrap().to_string(), parsed.to_string());
        }
        for g in good {
            assert!(re.is_match(g), "{format}: {g} should match");
        }
        for b in bad {
            assert!(!re.is_match(b), "{format}: {b} should not match");
        }
    }

    #[test]
    fn formats() {
        check(
            "date",
            &["2024-02-29", "2000-02-29", "1999-12-31"],
            &["2023-02-29", "1900-02-29", "2024-13-01", "2024-04-31", "24-01-01"],
        );
        check("time", &["08:30:06Z", "23:59:59.123+05:30", "00:00:00z"], &["24:00:00Z", "08:30:06", "08:30:06+24:00"]);
        check(
            "date-time",
            &["1963-06-19T08:30:06.283185Z", "1963-06-19t08:30:06z"],
            &["1963-06-19 08:30:06Z", "1963-06-19T08:30:06"],
        );
        check("duration", &["P4DT12H30M5S", "P1W", "PT1S", "P1Y2M"], &["P", "PT", "P1D2H", "P1Y2W", "4DT12H"]);
        check(
            "email",
            &["joe.bloggs@example.com", "te~st@example.com", "a@[127.0.0.1]"],
            &["2962", ".a@example.com", "a..b@example.com", "a@"],
        );
        check(
            "hostname",
            &["www.example.com", "a", "a--b.c", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk.com"],
            &["-a.com", "a-.com", "a..b", "", "xn--4gbwdl", "ab--c"],
        );
        check("ipv4", &["192.168.0.1", "0.0.0.0"], &["256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"]);
        check(
            "ipv6",
            &["::1", "::", "1:2:3:4:5:6:7:8", "::ffff:192.168.0.1", "1::8"],
            &["12345::", "1:2:3:4:5:6:7:8:9", ":1", "1:::2"],
        );
        check(
            "uuid",
            &["2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
            &["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08aa9811eab4aa73b441d16380"],
        );
        check(
            "uri",
            &["http://foo.bar/?baz=qux#quux", "urn:isbn:0451450523", "http://[::1]:80/x"],
            &["//foo.bar", "\\\\WINDOWS", "http:// x", "x"],
        );
        check("uri-reference", &["/abc", "#frag", "", "../x?y"], &["\\\\WINDOWS", "#frag#x", "a b"]);
    }
}

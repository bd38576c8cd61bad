//! What the report tests share: the charts a report links, checked as SVG.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

/// The targets of the report's image links, in order.
pub fn chart_links(md: &str) -> Vec<String> {
    md.split("![").skip(1).filter_map(|s| s.split("](").nth(1)?.split(')').next().map(str::to_string)).collect()
}

/// Checks every chart `md` links: it exists in `dir`, parses as XML with an `<svg>` root,
/// and every series its legend names is drawn (a `g.series` with that name holding at least
/// one point), in at least one panel; no series is drawn that the legend does not name.
/// Returns how many charts were checked.
pub fn check_charts(dir: &Path, md: &str) -> usize {
    let links = chart_links(md);
    for link in &links {
        assert!(link.ends_with(".svg"), "{link}");
        let path = dir.join(link);
        let svg = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{link}: not well-formed: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{link}");
        assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"), "{link}");
        let class = |n: &roxmltree::Node, c: &str| n.attribute("class") == Some(c);
        let legend: BTreeSet<&str> =
            doc.descendants().filter(|n| class(n, "key")).filter_map(|n| n.attribute("data-series")).collect();
        assert!(!legend.is_empty(), "{link}: no legend");
        let drawn: BTreeSet<&str> = doc
            .descendants()
            .filter(|n| class(n, "series") && n.descendants().any(|c| c.tag_name().name() == "circle"))
            .filter_map(|n| n.attribute("data-series"))
            .collect();
        assert_eq!(legend, drawn, "{link}: the legend names what is drawn, and only that");
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{link}");
    }
    links.len()
}

/// The rows of every Markdown table in `md` (header and separator rows included), as cells.
pub fn table_rows(md: &str) -> Vec<Vec<String>> {
    md.lines()
        .filter(|l| l.starts_with('|') && l.ends_with('|'))
        .map(|l| l[1..l.len() - 1].split(" | ").map(|c| c.trim().to_string()).collect())
        .collect()
}

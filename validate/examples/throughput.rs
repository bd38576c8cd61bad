//! Validation throughput: generates a large JSONL file of person records (one in ten
//! invalid) against `fixtures/schemas/person.json`, checks it with the default options
//! (parallel) and on one thread, and prints one line of JSON:
//!
//! ```text
//! {"bench":"validate_throughput","schema":"person.json","records":200000,"bytes":...,"invalid":20000,"threads":2,"seconds":...,"records_per_s":...,"mib_per_s":...,"seconds_1_thread":...,"records_per_s_1_thread":...}
//! ```
//!
//! Run it in release: `cargo run --release -p stencil-validate --example throughput
//! [-- RECORDS]` (200,000 records by default).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use stencil_schema::{Registry, Validator};
use stencil_validate::{Checker, Input, Options, Outcome, Record, Reporter};

/// Counts outcomes; prints nothing.
struct Count {
    valid: usize,
    invalid: usize,
    unreadable: usize,
}

impl Reporter for Count {
    fn record(&mut self, _input: &Input, record: &Record) -> std::io::Result<()> {
        match record.outcome {
            Outcome::Valid => self.valid += 1,
            Outcome::Invalid(_) => self.invalid += 1,
            Outcome::Unreadable(_) => self.unreadable += 1,
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// One person record as an extraction model would write it; every tenth is invalid.
fn person(rng: &mut Rng, i: usize) -> String {
    const FIRST: &[&str] = &["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken"];
    const LAST: &[&str] = &["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"];
    const ROLES: &[&str] = &["employee", "contractor", "customer", "supplier", "other"];
    const CITIES: &[&str] = &["London", "Paris", "Berlin", "Zürich", "Tokyo", "New York"];
    const COUNTRIES: &[&str] = &["GB", "FR", "DE", "CH", "JP", "US"];
    let (first, last) = (rng.pick(FIRST), rng.pick(LAST));
    let age = if i % 10 == 9 { 150 } else { 18 + rng.below(70) };
    format!(
        concat!(
            r#"{{"name":"{} {}","age":{},"email":"{}.{}@example.com","birth_date":"19{:02}-{:02}-{:02}","#,
            r#""role":"{}","address":{{"street":"{} Main Street","city":"{}","postal_code":"{}","country":"{}"}},"#,
            r#""phones":["+41 44 {:03} {:02} {:02}"],"languages":["en","fr"]}}"#
        ),
        first,
        last,
        age,
        first.to_lowercase(),
        last.to_lowercase(),
        rng.below(100),
        1 + rng.below(12),
        1 + rng.below(28),
        rng.pick(ROLES),
        1 + rng.below(200),
        rng.pick(CITIES),
        10000 + rng.below(90000),
        rng.pick(COUNTRIES),
        rng.below(1000),
        rng.below(100),
        rng.below(100),
    )
}

fn run(checker: &Checker, path: &Path) -> (f64, Count) {
    let mut count = Count { valid: 0, invalid: 0, unreadable: 0 };
    let start = Instant::now();
    let file = std::fs::File::open(path).expect("the generated file opens");
    checker.check_reader(&Input::new(path), file, &mut count).expect("counting does not fail");
    (start.elapsed().as_secs_f64(), count)
}

fn main() {
    let records: usize = std::env::args().nth(1).map_or(200_000, |n| n.parse().expect("RECORDS is a number"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let schema_path = root.join("fixtures/schemas/person.json");
    let schema = serde_json::from_slice(&std::fs::read(&schema_path).expect("the schema reads")).expect("JSON");
    let validator = Validator::new(&schema, &Registry::new()).expect("the schema compiles");

    let path = std::env::temp_dir().join(format!("stencil-validate-throughput-{}.jsonl", std::process::id()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("a temp file"));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..records {
        writeln!(out, "{}", person(&mut rng, i)).expect("write");
    }
    drop(out);
    let bytes = std::fs::metadata(&path).expect("metadata").len();

    let parallel = Checker::new(validator, Options::default());
    let (seconds, count) = run(&parallel, &path);
    assert_eq!(count.valid + count.invalid, records, "every record is read");
    assert_eq!(count.invalid, records / 10, "every tenth record is invalid");
    assert_eq!(count.unreadable, 0);
    let validator = Validator::new(&schema, &Registry::new()).expect("the schema compiles");
    let sequential = Checker::new(validator, Options { parallel: false, ..Options::default() });
    let (seconds_1, _) = run(&sequential, &path);
    std::fs::remove_file(&path).ok();

    println!(
        concat!(
            r#"{{"bench":"validate_throughput","schema":"person.json","records":{},"bytes":{},"invalid":{},"#,
            r#""threads":{},"seconds":{:.3},"records_per_s":{:.0},"mib_per_s":{:.1},"#,
            r#""seconds_1_thread":{:.3},"records_per_s_1_thread":{:.0}}}"#
        ),
        records,
        bytes,
        count.invalid,
        rayon::current_num_threads(),
        seconds,
        records as f64 / seconds,
        bytes as f64 / seconds / (1024.0 * 1024.0),
        seconds_1,
        records as f64 / seconds_1,
    );
}

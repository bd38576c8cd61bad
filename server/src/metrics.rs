//! Counters for `GET /metrics`, in Prometheus' text format (version 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Upper bounds of the latency histograms, in seconds.
const LATENCY_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Upper bounds of the per-token mask time histogram, in seconds.
const MASK_BUCKETS: &[f64] = &[0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05];

/// A Prometheus histogram: cumulative counts per bucket, the sum and the count.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum in microseconds (an integer, so that it can be atomic).
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation of `seconds`.
    pub fn observe(&self, seconds: f64) {
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            if seconds <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.sum_us.fetch_add((seconds.max(0.0) * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {}", count.load(Ordering::Relaxed));
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Everything `/metrics` reports.
#[derive(Debug)]
pub struct Metrics {
    /// Requests answered, by route and status code.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Prompt tokens of finished requests.
    pub prompt_tokens: AtomicU64,
    /// Generated tokens (all completions).
    pub completion_tokens: AtomicU64,
    /// Generated tokens the grammar forced.
    pub forced_tokens: AtomicU64,
    /// Speculative draft tokens checked by sampling.
    pub drafted_tokens: AtomicU64,
    /// Of those, accepted.
    pub accepted_tokens: AtomicU64,
    /// Requests waiting for a sequence.
    pub queue_depth: AtomicUsize,
    /// Requests being decoded.
    pub active: AtomicUsize,
    /// Completions cancelled because their client went away.
    pub cancelled: AtomicU64,
    /// llama.cpp batches run.
    pub steps: AtomicU64,
    /// Time from a request's arrival to its first output text.
    pub time_to_first_token: Histogram,
    /// Time a request waited for a sequence.
    pub queue_time: Histogram,
    /// Time computing masks, per generated token.
    pub mask_time_per_token: Histogram,
    /// Time computing masks, in microseconds.
    pub mask_us: AtomicU64,
    /// Time the decode loop waited for a mask after the forward pass, in microseconds.
    pub mask_wait_us: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            forced_tokens: AtomicU64::new(0),
            drafted_tokens: AtomicU64::new(0),
            accepted_tokens: AtomicU64::new(0),
            queue_depth: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            cancelled: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            time_to_first_token: Histogram::new(LATENCY_BUCKETS),
            queue_time: Histogram::new(LATENCY_BUCKETS),
            mask_time_per_token: Histogram::new(MASK_BUCKETS),
            mask_us: AtomicU64::new(0),
            mask_wait_us: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one answered request.
    pub fn count_request(&self, route: &str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((route.to_string(), status)).or_insert(0) += 1;
    }

    /// Requests answered on `route` with `status`.
    pub fn requests(&self, route: &str, status: u16) -> u64 {
        let map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(route.to_string(), status)).copied().unwrap_or(0)
    }

    /// The text format; `cache` is the grammar cache's (hits, misses, entries).
    pub fn render(&self, cache: (u64, u64, usize), loaded: bool) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, kind: &str, value: String| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        let _ = writeln!(
            out,
            "# HELP stencil_requests_total HTTP requests answered, by route and status.\n\
             # TYPE stencil_requests_total counter"
        );
        for ((route, status), n) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "stencil_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
        }
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        counter(&mut out, "stencil_model_loaded", "1 once the model is loaded.", "gauge", u8::from(loaded).to_string());
        counter(
            &mut out,
            "stencil_prompt_tokens_total",
            "Prompt tokens of finished requests.",
            "counter",
            load(&self.prompt_tokens),
        );
        counter(
            &mut out,
            "stencil_completion_tokens_total",
            "Generated tokens.",
            "counter",
            load(&self.completion_tokens),
        );
        counter(
            &mut out,
            "stencil_forced_tokens_total",
            "Generated tokens the grammar forced.",
            "counter",
            load(&self.forced_tokens),
        );
        counter(
            &mut out,
            "stencil_draft_tokens_total",
            "Speculative draft tokens checked by sampling.",
            "counter",
            load(&self.drafted_tokens),
        );
        counter(
            &mut out,
            "stencil_draft_tokens_accepted_total",
            "Speculative draft tokens accepted.",
            "counter",
            load(&self.accepted_tokens),
        );
        counter(
            &mut out,
            "stencil_queue_depth",
            "Requests waiting for a sequence.",
            "gauge",
            self.queue_depth.load(Ordering::Relaxed).to_string(),
        );
        counter(
            &mut out,
            "stencil_active_requests",
            "Requests being decoded.",
            "gauge",
            self.active.load(Ordering::Relaxed).to_string(),
        );
        counter(
            &mut out,
            "stencil_cancelled_total",
            "Completions cancelled because their client went away.",
            "counter",
            load(&self.cancelled),
        );
        counter(&mut out, "stencil_decode_steps_total", "llama.cpp batches run.", "counter", load(&self.steps));
        let seconds = |a: &AtomicU64| (a.load(Ordering::Relaxed) as f64 / 1e6).to_string();
        counter(
            &mut out,
            "stencil_mask_seconds_total",
            "Time computing token masks.",
            "counter",
            seconds(&self.mask_us),
        );
        counter(
            &mut out,
            "stencil_mask_wait_seconds_total",
            "Time the decode loop waited for a mask after the forward pass.",
            "counter",
            seconds(&self.mask_wait_us),
        );
        counter(
            &mut out,
            "stencil_grammar_cache_hits_total",
            "Constraints found compiled.",
            "counter",
            cache.0.to_string(),
        );
        counter(
            &mut out,
            "stencil_grammar_cache_misses_total",
            "Constraints compiled.",
            "counter",
            cache.1.to_string(),
        );
        counter(&mut out, "stencil_grammar_cache_entries", "Compiled constraints held.", "gauge", cache.2.to_string());
        self.time_to_first_token.write(
            &mut out,
            "stencil_time_to_first_token_seconds",
            "From a request's arrival to its first output text.",
        );
        self.queue_time.write(&mut out, "stencil_queue_seconds", "Time a request waited for a sequence.");
        self.mask_time_per_token.write(
            &mut out,
            "stencil_mask_seconds_per_token",
            "Mask computation time per generated token, per completion.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.count_request("/v1/chat/completions", 200);
        m.count_request("/v1/chat/completions", 200);
        m.time_to_first_token.observe(0.02);
        let text = m.render((3, 1, 1), true);
        assert!(text.contains("stencil_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2"), "{text}");
        assert!(text.contains("stencil_time_to_first_token_seconds_bucket{le=\"0.01\"} 0"), "{text}");
        assert!(text.contains("stencil_time_to_first_token_seconds_bucket{le=\"0.025\"} 1"), "{text}");
        assert!(text.contains("stencil_grammar_cache_hits_total 3"), "{text}");
        assert!(text.contains("stencil_model_loaded 1"), "{text}");
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}

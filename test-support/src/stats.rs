//! Goodness-of-fit for the statistical tests: Pearson's chi-square of observed counts
//! against exact probabilities, and its critical value at 0.001.

/// Pearson's chi-square of `counts` against `expected` probabilities, and its degrees of
/// freedom. Cells whose expected count is below 5 are pooled into one (the test's
/// approximation needs that); a cell of probability 0 that was observed gives infinity.
///
/// ```
/// use stencil_test_support::stats::{chi_square, critical};
/// let (stat, df) = chi_square(&[50, 50], &[0.5, 0.5]);
/// assert_eq!((stat, df), (0.0, 1));
/// assert!(chi_square(&[90, 10], &[0.5, 0.5]).0 > critical(1));
/// assert_eq!(chi_square(&[1, 99], &[0.0, 1.0]).0, f64::INFINITY);
/// ```
pub fn chi_square(counts: &[usize], expected: &[f64]) -> (f64, usize) {
    assert_eq!(counts.len(), expected.len(), "one probability per count");
    let n = counts.iter().sum::<usize>() as f64;
    let (mut stat, mut cells) = (0.0, 0);
    let (mut pooled_count, mut pooled_expected) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(expected) {
        if p == 0.0 {
            if c > 0 {
                return (f64::INFINITY, 0);
            }
            continue;
        }
        let e = p * n;
        if e < 5.0 {
            pooled_count += c as f64;
            pooled_expected += e;
            continue;
        }
        stat += (c as f64 - e).powi(2) / e;
        cells += 1;
    }
    if pooled_expected > 0.0 {
        stat += (pooled_count - pooled_expected).powi(2) / pooled_expected;
        cells += 1;
    }
    (stat, cells.max(2) - 1)
}

/// The chi-square quantile at 1 − 0.001 with `df` degrees of freedom (Wilson–Hilferty).
///
/// ```
/// let c = stencil_test_support::stats::critical(10);
/// assert!((c - 29.59).abs() < 0.2);
/// ```
pub fn critical(df: usize) -> f64 {
    let d = df.max(1) as f64;
    let z = 3.090_232;
    d * (1.0 - 2.0 / (9.0 * d) + z * (2.0 / (9.0 * d)).sqrt()).powi(3)
}

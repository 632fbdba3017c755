//! The link's per-packet decisions, without I/O or a clock of its own: a packet that
//! arrives at `now_ns` is dropped (Bernoulli or Gilbert–Elliott loss) or released at
//! `release_ns` = arrival + delay + jitter, in arrival order unless `reorder` is set,
//! and maybe duplicated. Time is plain nanoseconds, so tests drive it on a virtual clock.
//!
//! Every packet consumes the same five random draws whatever the knobs, so changing
//! one knob (say jitter) does not shift the loss pattern of a given seed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// Gilbert–Elliott two-state loss: `p` = P(good → bad), `r` = P(bad → good) per packet;
/// a packet is lost with `loss_good` in the good state and `loss_bad` in the bad state.
/// Mean bad-state run is 1/r packets; the bad state holds p/(p+r) of the time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    pub p: f64,
    pub r: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
}

/// One direction of an emulated link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    pub delay_ns: u64,
    /// Uniform jitter in [-jitter_ns, +jitter_ns] around `delay_ns` (a delay never goes below 0).
    pub jitter_ns: u64,
    /// Allow a jittered packet to overtake an earlier one (netem's behaviour); off keeps order.
    pub reorder: bool,
    /// Bernoulli loss probability per packet.
    pub loss: f64,
    pub gilbert_elliott: Option<GilbertElliott>,
    /// Probability that a delivered packet is sent twice.
    pub duplicate: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay_ns: 0,
            jitter_ns: 0,
            reorder: false,
            loss: 0.0,
            gilbert_elliott: None,
            duplicate: 0.0,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("{name} must be a probability in [0, 1], got {value}")]
    NotProbability { name: &'static str, value: f64 },
    #[error("--ge-r must be > 0 (0 would keep the link in the bad state forever)")]
    GilbertElliottNeverRecovers,
}

fn check_probability(name: &'static str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::NotProbability { name, value })
    }
}

impl LinkConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_probability("--loss", self.loss)?;
        check_probability("--duplicate", self.duplicate)?;
        if let Some(ge) = &self.gilbert_elliott {
            check_probability("--ge-p", ge.p)?;
            check_probability("--ge-r", ge.r)?;
            check_probability("--ge-loss-good", ge.loss_good)?;
            check_probability("--ge-loss-bad", ge.loss_bad)?;
            if ge.r == 0.0 {
                return Err(ConfigError::GilbertElliottNeverRecovers);
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// Bernoulli (`--loss`).
    Random,
    /// Gilbert–Elliott (`--ge-*`).
    Burst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Drop(DropCause),
    Deliver { release_ns: u64, duplicate: bool },
}

pub struct Scheduler {
    config: LinkConfig,
    rng: ChaCha8Rng,
    ge_in_bad_state: bool,
    last_release_ns: u64,
}

impl Scheduler {
    pub fn new(config: LinkConfig, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Scheduler {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            ge_in_bad_state: false,
            last_release_ns: 0,
        })
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Decide the fate of one packet arriving at `now_ns` (calls must come in time order).
    pub fn decide(&mut self, now_ns: u64) -> Decision {
        let u_loss: f64 = self.rng.gen();
        let u_ge_transition: f64 = self.rng.gen();
        let u_ge_loss: f64 = self.rng.gen();
        let u_jitter: f64 = self.rng.gen();
        let u_duplicate: f64 = self.rng.gen();

        let burst_loss = match self.config.gilbert_elliott {
            Some(ge) => {
                let leave_prob = if self.ge_in_bad_state { ge.r } else { ge.p };
                if u_ge_transition < leave_prob {
                    self.ge_in_bad_state = !self.ge_in_bad_state;
                }
                let loss_prob = if self.ge_in_bad_state {
                    ge.loss_bad
                } else {
                    ge.loss_good
                };
                u_ge_loss < loss_prob
            }
            None => false,
        };
        if u_loss < self.config.loss {
            return Decision::Drop(DropCause::Random);
        }
        if burst_loss {
            return Decision::Drop(DropCause::Burst);
        }

        let release_ns = self.release_time_ns(now_ns, u_jitter);
        Decision::Deliver {
            release_ns,
            duplicate: u_duplicate < self.config.duplicate,
        }
    }

    fn release_time_ns(&mut self, now_ns: u64, u_jitter: f64) -> u64 {
        let jitter = self.config.jitter_ns as f64;
        // u in [0,1) -> offset in [-jitter, +jitter)
        let offset_ns = ((2.0 * u_jitter - 1.0) * jitter).round() as i64;
        let delay_ns = (self.config.delay_ns as i64 + offset_ns).max(0) as u64;
        let mut release_ns = now_ns.saturating_add(delay_ns);
        if !self.config.reorder {
            // FIFO: a packet never leaves before the one ahead of it.
            release_ns = release_ns.max(self.last_release_ns);
        }
        self.last_release_ns = self.last_release_ns.max(release_ns);
        release_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn assert_within_tolerance(what: &str, measured: f64, expected: f64, tolerance: f64) {
        assert!(
            (measured - expected).abs() <= tolerance,
            "{what}: measured {measured}, expected {expected} ± {tolerance}"
        );
    }

    /// Packets every `gap_ns` on a virtual clock; returns (arrival_ns, decision).
    fn run(config: LinkConfig, seed: u64, packets: usize, gap_ns: u64) -> Vec<(u64, Decision)> {
        let mut scheduler = Scheduler::new(config, seed).unwrap();
        (0..packets)
            .map(|i| {
                let now_ns = i as u64 * gap_ns;
                (now_ns, scheduler.decide(now_ns))
            })
            .collect()
    }

    fn release_times(decisions: &[(u64, Decision)]) -> Vec<(u64, u64)> {
        decisions
            .iter()
            .filter_map(|(arrival, d)| match d {
                Decision::Deliver { release_ns, .. } => Some((*arrival, *release_ns)),
                Decision::Drop(_) => None,
            })
            .collect()
    }

    #[test]
    fn constant_delay_is_exact() {
        let config = LinkConfig {
            delay_ns: 20 * MS,
            ..Default::default()
        };
        for (arrival, release) in release_times(&run(config, 1, 1000, 120_000)) {
            assert_eq!(release - arrival, 20 * MS);
        }
    }

    #[test]
    fn jitter_without_reorder_keeps_order_and_bounds() {
        let config = LinkConfig {
            delay_ns: 20 * MS,
            jitter_ns: 5 * MS,
            ..Default::default()
        };
        let times = release_times(&run(config, 3, 100_000, 100_000));
        assert_eq!(times.len(), 100_000);
        for pair in times.windows(2) {
            assert!(pair[1].1 >= pair[0].1, "order broken: {pair:?}");
        }
        for (arrival, release) in &times {
            let delay = release - arrival;
            assert!(
                (15 * MS..=25 * MS).contains(&delay),
                "delay {delay} out of 20±5 ms"
            );
        }
        // The jitter is real: delays spread over most of the window.
        let min = times.iter().map(|(a, r)| r - a).min().unwrap();
        let max = times.iter().map(|(a, r)| r - a).max().unwrap();
        assert!(min < 16 * MS && max > 24 * MS, "spread {min}..{max}");
    }

    #[test]
    fn jitter_with_reorder_lets_packets_overtake() {
        let config = LinkConfig {
            delay_ns: 20 * MS,
            jitter_ns: 5 * MS,
            reorder: true,
            ..Default::default()
        };
        let times = release_times(&run(config, 3, 10_000, 100_000));
        let overtaken = times.windows(2).filter(|p| p[1].1 < p[0].1).count();
        assert!(overtaken > 1000, "only {overtaken} reorderings");
        let mean_delay_ms =
            times.iter().map(|(a, r)| (r - a) as f64).sum::<f64>() / times.len() as f64 / MS as f64;
        assert_within_tolerance("mean delay ms", mean_delay_ms, 20.0, 0.1);
    }

    #[test]
    fn bernoulli_loss_rate_for_fixed_seed() {
        let config = LinkConfig {
            loss: 0.01,
            ..Default::default()
        };
        let decisions = run(config, 42, 100_000, 1000);
        let dropped = decisions
            .iter()
            .filter(|(_, d)| *d == Decision::Drop(DropCause::Random))
            .count();
        // binomial sigma = sqrt(1e5 * 0.01 * 0.99) = 31 packets = 0.031 %; allow ~3 sigma
        assert_within_tolerance("loss rate", dropped as f64 / 1e5, 0.01, 0.001);
    }

    #[test]
    fn same_seed_same_pattern_other_seed_other_pattern() {
        let config = LinkConfig {
            loss: 0.1,
            jitter_ns: MS,
            delay_ns: 5 * MS,
            ..Default::default()
        };
        let a = run(config.clone(), 9, 5000, 1000);
        let b = run(config.clone(), 9, 5000, 1000);
        let c = run(config, 10, 5000, 1000);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn loss_pattern_does_not_depend_on_jitter() {
        let lossy = LinkConfig {
            loss: 0.05,
            ..Default::default()
        };
        let lossy_jittery = LinkConfig {
            jitter_ns: 3 * MS,
            delay_ns: 10 * MS,
            ..lossy.clone()
        };
        let dropped = |d: &[(u64, Decision)]| -> Vec<bool> {
            d.iter()
                .map(|(_, x)| matches!(x, Decision::Drop(_)))
                .collect()
        };
        assert_eq!(
            dropped(&run(lossy, 5, 5000, 1000)),
            dropped(&run(lossy_jittery, 5, 5000, 1000))
        );
    }

    #[test]
    fn gilbert_elliott_burst_lengths_and_rate() {
        let ge = GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let config = LinkConfig {
            gilbert_elliott: Some(ge),
            ..Default::default()
        };
        let decisions = run(config, 11, 1_000_000, 1000);
        let lost: Vec<bool> = decisions
            .iter()
            .map(|(_, d)| matches!(d, Decision::Drop(DropCause::Burst)))
            .collect();

        let mut bursts = Vec::new();
        let mut run_len = 0usize;
        for &l in &lost {
            if l {
                run_len += 1;
            } else if run_len > 0 {
                bursts.push(run_len);
                run_len = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<usize>() as f64 / bursts.len() as f64;
        // geometric run length, mean 1/r = 4 packets; ~7700 bursts, sigma of the mean ~0.04
        assert_within_tolerance("mean burst length", mean_burst, 4.0, 0.15);
        let longest = *bursts.iter().max().unwrap();
        assert!(
            longest >= 15,
            "bursts should have a geometric tail, longest {longest}"
        );
        let rate = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
        assert_within_tolerance("stationary loss rate", rate, 0.01 / 0.26, 0.003);
    }

    #[test]
    fn gilbert_elliott_partial_losses_per_state() {
        // Good state loses 1 %, bad state 50 %: rate = pi_g*0.01 + pi_b*0.5
        let ge = GilbertElliott {
            p: 0.05,
            r: 0.2,
            loss_good: 0.01,
            loss_bad: 0.5,
        };
        let config = LinkConfig {
            gilbert_elliott: Some(ge),
            ..Default::default()
        };
        let decisions = run(config, 12, 500_000, 1000);
        let rate = decisions
            .iter()
            .filter(|(_, d)| matches!(d, Decision::Drop(_)))
            .count() as f64
            / 5e5;
        let expected = 0.8 * 0.01 + 0.2 * 0.5;
        assert_within_tolerance("GE loss rate", rate, expected, 0.004);
    }

    #[test]
    fn duplicate_rate() {
        let config = LinkConfig {
            duplicate: 0.02,
            ..Default::default()
        };
        let decisions = run(config, 13, 100_000, 1000);
        let dups = decisions
            .iter()
            .filter(|(_, d)| {
                matches!(
                    d,
                    Decision::Deliver {
                        duplicate: true,
                        ..
                    }
                )
            })
            .count();
        assert_within_tolerance("duplicate rate", dups as f64 / 1e5, 0.02, 0.0015);
    }

    #[test]
    fn invalid_config_is_rejected_with_the_flag_name() {
        let bad = LinkConfig {
            loss: 1.5,
            ..Default::default()
        };
        assert_eq!(
            Scheduler::new(bad, 0).err().unwrap().to_string(),
            "--loss must be a probability in [0, 1], got 1.5"
        );
        let nan = LinkConfig {
            duplicate: f64::NAN,
            ..Default::default()
        };
        assert!(Scheduler::new(nan, 0).is_err());
        let stuck = LinkConfig {
            gilbert_elliott: Some(GilbertElliott {
                p: 0.1,
                r: 0.0,
                loss_good: 0.0,
                loss_bad: 1.0,
            }),
            ..Default::default()
        };
        assert_eq!(
            Scheduler::new(stuck, 0).err(),
            Some(ConfigError::GilbertElliottNeverRecovers)
        );
    }
}

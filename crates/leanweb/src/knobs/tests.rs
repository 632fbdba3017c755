//! The knob table against the enforcement: every bound and word of every knob is tried on
//! `Args` (clap's parsing, then `stack_config`, as leanweb's start does).
use clap::Parser;

use super::*;

/// Whether leanweb would start with these flags (beyond the set-up ones).
fn accepts(extra: &[&str]) -> bool {
    let root = std::env::temp_dir();
    let mut argv = vec!["leanweb", "--tap", "t0", "--addr4", "10.0.0.1/24", "--addr6", "fd00::1/64"];
    argv.extend(["--root", root.to_str().unwrap()]);
    argv.extend_from_slice(extra);
    match Args::try_parse_from(argv) {
        Ok(args) => args.stack_config(1).is_ok() && args.gso().is_ok(),
        Err(_) => false,
    }
}

/// Flags a knob's probes need so that only the probed value decides (cross-knob rules).
fn context(name: &str) -> Vec<&'static str> {
    match name {
        "recovery" => vec!["--sack", "on"],
        "rack_tlp" => vec!["--recovery", "newreno"],
        "rto_max_ms" => vec!["--rto-min-ms", "0"],
        _ => vec![],
    }
}

/// (value, accepted?) pairs at the rule's edges.
fn probes(rule: Rule) -> Vec<(String, bool)> {
    match rule {
        Rule::Number { min, max, min_exclusive } => {
            let step = if min == 0.0 { 1e-9 } else { min * 1e-6 };
            let mut probes = vec![
                (format!("{min}"), !min_exclusive),
                (format!("{}", min + step), true),
                (format!("{}", min - step), false),
                ("nan".into(), false),
                ("x".into(), false),
            ];
            match max {
                Some(max) => probes.extend([(format!("{max}"), true), (format!("{}", max * (1.0 + 1e-9)), false)]),
                None => probes.push(("1e12".into(), true)),
            }
            probes
        }
        Rule::Integer { min, max } => {
            let mut probes = vec![(format!("{min}"), true), ("1.5".into(), false), ("-1".into(), false)];
            if min > 0 {
                probes.push((format!("{}", min - 1), false));
            }
            if let Some(max) = max {
                probes.extend([(format!("{max}"), true), (format!("{}", max + 1), false)]);
            }
            probes
        }
        Rule::Word { words, any_case } => {
            let mut probes: Vec<(String, bool)> = words.iter().map(|w| (w.to_string(), true)).collect();
            for word in words {
                let flipped: String = word
                    .chars()
                    .map(|c| if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
                    .collect();
                if flipped != *word {
                    probes.push((flipped, any_case));
                }
            }
            probes.push(("bogus".into(), false));
            probes
        }
        Rule::Switch => ["on", "off", "true", "false"]
            .iter()
            .map(|w| (w.to_string(), true))
            .chain([("maybe".into(), false)])
            .collect(),
        Rule::Mac => vec![
            ("02:00:00:00:00:01".into(), true),
            ("01:00:00:00:00:01".into(), false),
            ("02:00:00:00:00".into(), false),
            ("zz:00:00:00:00:01".into(), false),
        ],
    }
}

#[test]
fn every_rule_matches_what_leanweb_accepts() {
    for knob in KNOBS {
        let flag = flag(knob.name).unwrap();
        for (value, expected) in probes(knob.rule) {
            let mut extra = context(knob.name);
            extra.extend([flag.as_str(), value.as_str()]);
            assert_eq!(accepts(&extra), expected, "{flag} {value}: the table says accepted = {expected}");
        }
    }
}

#[test]
fn conflicts_and_order_are_enforced() {
    for &(knob, with) in CONFLICTS {
        for other in with {
            let (a, b) = (flag(knob).unwrap(), flag(other).unwrap());
            assert!(!accepts(&[&a, "W2", &b, "0.5"]), "{a} with {b}");
            assert!(accepts(&[&a, "W2"]) && accepts(&[&b, "0.5"]));
        }
    }
    for &(low, high) in ORDERED {
        let (low, high) = (flag(low).unwrap(), flag(high).unwrap());
        assert!(!accepts(&[&low, "2000", &high, "1000"]), "{low} above {high}");
        assert!(accepts(&[&low, "1000", &high, "1000"]));
    }
}

#[test]
fn every_clap_flag_is_a_knob_or_a_set_up_flag() {
    let command = Args::command();
    let clap_ids: Vec<&str> =
        command.get_arguments().map(|a| a.get_id().as_str()).filter(|id| !["help", "version"].contains(id)).collect();
    for id in &clap_ids {
        assert!(KNOBS.iter().any(|k| k.name == *id) || SETUP_FLAGS.contains(id), "{id}: neither a knob nor set-up");
    }
    for knob in KNOBS {
        assert!(clap_ids.contains(&knob.name), "{}: no such flag", knob.name);
    }
}

#[test]
fn the_table_is_json_in_format_1() {
    let table: serde_json::Value = serde_json::from_str(&table_json()).unwrap();
    assert_eq!(table["format"], 1);
    assert_eq!(table["knobs"].as_array().unwrap().len(), KNOBS.len());
    let alpha = &table["knobs"][0];
    assert_eq!(
        *alpha,
        serde_json::json!({"name": "rto_alpha", "flag": "--rto-alpha", "kind": "number", "min": 0,
                                          "max": 1, "min_exclusive": true})
    );
    assert_eq!(table["profiles"], serde_json::json!({"bare": {"cc": "none"}, "modern": {"cc": "cubic"}}));
}

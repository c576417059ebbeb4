//! Checks of the top-up graph (README "Funds"): each `top_up.from` is
//! another configured submitter, and no funding cycle (A funds B funds A)
//! exists — in a cycle a low balance would be topped up with the same
//! money going round, each hop paying gas and counting against the caps.

use std::collections::BTreeMap;

use txmgr_actors::submitter::SubmitterSettings;

use super::{error::ConfigIssue, Config};

/// Every issue of the top-ups, chain by chain: funds and top-ups are per
/// (chain, submitter), so a funder must send on the target's chain.
pub(crate) fn check_top_ups(config: &Config) -> Vec<ConfigIssue> {
    let several = config.chains().len() > 1;
    let mut issues: Vec<ConfigIssue> = Vec::new();
    for chain in config.chains() {
        let settings: BTreeMap<String, SubmitterSettings> = config
            .resolved_submitters_on(chain.name)
            .into_iter()
            .map(|s| (s.address, s.settings))
            .collect();
        let on = several.then_some(chain.name);
        for issue in check_top_ups_among(&settings, on) {
            if !issues.contains(&issue) {
                issues.push(issue);
            }
        }
    }
    issues
}

/// Every issue of the top-ups among the submitters of one chain (lower-case
/// addresses with their settings there); `chain` is named in the reasons
/// when the deployment has several.
fn check_top_ups_among(
    submitters: &BTreeMap<String, SubmitterSettings>,
    chain: Option<&str>,
) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    let mut funder_of: BTreeMap<&str, String> = BTreeMap::new();
    let on = chain.map(|c| format!(" on chain {c}")).unwrap_or_default();
    for (address, settings) in submitters {
        let Some(top_up) = settings.top_up else {
            continue;
        };
        let from = format!("{:#x}", top_up.from);
        let key = format!("submitters.{address}.top_up.from");
        if from == *address {
            issues.push(ConfigIssue::new(key, "a submitter cannot top itself up"));
        } else if !submitters.contains_key(&from) {
            issues.push(ConfigIssue::new(
                key,
                format!("{from} is not a configured submitter{on}: the funder must be one"),
            ));
        } else {
            funder_of.insert(address.as_str(), from);
        }
    }
    // Each submitter has at most one funder: follow the chain from each
    // one; coming back to the start is a cycle (reported once, at its
    // smallest address).
    for start in funder_of.keys() {
        let mut path = vec![*start];
        let mut at = *start;
        while let Some(next) = funder_of.get(at) {
            if next == start {
                if path.iter().all(|member| start <= member) {
                    path.push(start);
                    issues.push(ConfigIssue::new(
                        format!("submitters.{start}.top_up.from"),
                        format!("funding cycle{on}: {}", path.join(" is funded by ")),
                    ));
                }
                break;
            }
            if path.contains(&next.as_str()) {
                break; // a cycle that does not pass through `start`
            }
            path.push(next.as_str());
            at = next.as_str();
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn funded_by(from: Option<&str>) -> SubmitterSettings {
        SubmitterSettings {
            min_balance: Some(1),
            top_up: from.map(|from| txmgr_actors::submitter::settings::TopUp {
                from: from.parse().expect("address"),
                target: 2,
                max_per_day: 10,
                funder_max_per_day: None,
            }),
            ..SubmitterSettings::default()
        }
    }

    fn address(byte: u8) -> String {
        format!("0x{}", hex::encode([byte; 20]))
    }

    #[test]
    fn a_funding_cycle_is_refused_once_naming_it() {
        let (a, b, c, d) = (address(0xa), address(0xb), address(0xc), address(0xd));
        let submitters: BTreeMap<String, SubmitterSettings> = [
            (a.clone(), funded_by(Some(&b))),
            (b.clone(), funded_by(Some(&c))),
            (c.clone(), funded_by(Some(&a))),
            (d.clone(), funded_by(Some(&a))),
        ]
        .into_iter()
        .collect();
        let issues = check_top_ups_among(&submitters, None);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].key, format!("submitters.{a}.top_up.from"));
        assert!(issues[0].reason.contains("funding cycle"), "{issues:?}");
        assert!(issues[0].reason.contains(&c), "{issues:?}");

        let chain: BTreeMap<String, SubmitterSettings> = [
            (a.clone(), funded_by(Some(&b))),
            (b.clone(), funded_by(Some(&c))),
            (c.clone(), funded_by(None)),
        ]
        .into_iter()
        .collect();
        assert!(check_top_ups_among(&chain, None).is_empty());
    }
}

//! What configuration makes of a policy (README "Guardrails"): `issues`
//! refuse the configuration (the rules cannot work as written), `bypasses`
//! are warnings — `config check` prints them, start and reload log them —
//! about rules a client can step around with a request the policy accepts.

use super::{policy::MAX_SPEND_WINDOW, Policy};

impl Policy {
    /// Why this policy cannot work, as `(key, reason)` with keys relative
    /// to the settings table: configuration errors (e.g. selectors for a
    /// destination that `allowed_to` does not allow).
    pub fn issues(&self) -> Vec<(&'static str, String)> {
        let mut issues = Vec::new();
        if self.max_fee_per_tx.is_some_and(|max| max < 21_000) {
            issues.push((
                "policy.max_fee_per_tx",
                "must be at least 21000 wei (1 wei per gas of a plain transfer)".to_owned(),
            ));
        }
        if self.spend_limit.is_some_and(|l| l.window.is_zero()) {
            issues.push((
                "policy.spend_limit.window",
                "must be greater than zero".to_owned(),
            ));
        }
        if self
            .spend_limit
            .is_some_and(|l| l.window > MAX_SPEND_WINDOW)
        {
            issues.push((
                "policy.spend_limit.window",
                "must be at most 100 years (the database's interval arithmetic)".to_owned(),
            ));
        }
        if self
            .spend_limit
            .is_some_and(|l| l.value.is_none() && l.fees.is_none())
        {
            issues.push((
                "policy.spend_limit",
                "needs `value`, `fees` or both".to_owned(),
            ));
        }
        if self.spend_wait.is_zero() {
            issues.push(("policy.spend_wait", "must be greater than zero".to_owned()));
        }
        if self.deny_contract_creation && self.allow_contract_creation {
            issues.push((
                "policy.allow_contract_creation",
                "contradicts policy.deny_contract_creation: set one of them".to_owned(),
            ));
        }
        if let (Some(allowed), Some(selectors)) = (&self.allowed_to, &self.allowed_selectors) {
            for to in selectors.keys().filter(|to| !allowed.contains(to)) {
                issues.push((
                    "policy.allowed_selectors",
                    format!("{to:#x} is not in policy.allowed_to: its calls could never be sent"),
                ));
            }
        }
        issues
    }

    /// Rules of this policy that a request it accepts can step around, as
    /// `(key, reason)` with keys relative to the settings table: accepted
    /// but worth an operator's second look.
    pub fn bypasses(&self) -> Vec<(&'static str, String)> {
        let mut bypasses = Vec::new();
        if let Some(rule) = self
            .destination_rule()
            .filter(|_| self.allow_contract_creation && !self.deny_contract_creation)
        {
            bypasses.push((
                "policy.allow_contract_creation",
                format!(
                    "contract creations are accepted: their init code can send the value \
                     and call any address, so policy.{rule} does not bound what this \
                     submitter sends"
                ),
            ));
        }
        if self.allowed_selectors.is_some() && self.allowed_to.is_none() {
            bypasses.push((
                "policy.allowed_selectors",
                "without policy.allowed_to any other destination is accepted: a contract \
                 that relays calls (a multicall) reaches the listed destinations with any \
                 selector; list the destinations in policy.allowed_to"
                    .to_owned(),
            ));
        }
        bypasses
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{address, Address};

    use super::*;

    const TOKEN: Address = address!("1111111111111111111111111111111111111111");
    const PAYEE: Address = address!("2222222222222222222222222222222222222222");

    fn policy(rules: serde_json::Value) -> Policy {
        serde_json::from_value(rules).expect("policy")
    }

    fn keys(found: &[(&'static str, String)]) -> Vec<&'static str> {
        found.iter().map(|(key, _)| *key).collect()
    }

    #[test]
    fn selectors_of_a_destination_allowed_to_refuses_are_an_issue() {
        let p = policy(serde_json::json!({
            "allowed_to": [PAYEE],
            "allowed_selectors": { TOKEN.to_string(): ["0xa9059cbb"] },
        }));
        let issues = p.issues();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "policy.allowed_selectors");
        assert!(issues[0].1.starts_with("0x1111"), "{issues:?}");
    }

    #[test]
    fn creation_both_allowed_and_denied_is_an_issue() {
        let p = policy(serde_json::json!({
            "deny_contract_creation": true, "allow_contract_creation": true,
        }));
        assert_eq!(keys(&p.issues()), ["policy.allow_contract_creation"]);
    }

    #[test]
    fn rules_a_request_can_step_around_are_warned() {
        let opened = policy(serde_json::json!({
            "allowed_to": [TOKEN], "allow_contract_creation": true,
        }));
        assert_eq!(keys(&opened.bypasses()), ["policy.allow_contract_creation"]);
        assert!(
            opened.bypasses()[0].1.contains("policy.allowed_to"),
            "{:?}",
            opened.bypasses()
        );
        let selectors_alone = policy(serde_json::json!({
            "allowed_selectors": { TOKEN.to_string(): ["0xa9059cbb"] },
        }));
        assert_eq!(
            keys(&selectors_alone.bypasses()),
            ["policy.allowed_selectors"]
        );
        for sound in [
            serde_json::json!({ "allowed_to": [TOKEN] }),
            serde_json::json!({
                "allowed_to": [TOKEN],
                "allowed_selectors": { TOKEN.to_string(): ["0xa9059cbb"] },
            }),
            serde_json::json!({ "allow_contract_creation": true }),
            serde_json::json!({}),
        ] {
            assert!(policy(sound.clone()).bypasses().is_empty(), "{sound}");
        }
    }
}

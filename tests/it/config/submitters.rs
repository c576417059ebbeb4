//! `[submitters."0x…"]`: address keys, signers and overrides.

use std::time::Duration;

use txmgr_actors::{chain::FinalityTag, domain::Finality};

use super::{assert_rejects, parse, BASE, DEV, OTHER};

#[test]
fn bad_address_is_rejected() {
    for bad in [
        "0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226",
        "f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
        "0xZ39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    ] {
        let text =
            format!("{BASE}\n[submitters.\"{bad}\"]\nsigner = {{ kind = \"env\", env = \"K\" }}\n");
        assert_rejects(&text, &format!("submitters.{bad}"));
    }
}

#[test]
fn duplicate_submitter_differing_in_case_names_both_keys() {
    let upper = "0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266";
    let text =
        format!("{BASE}\n[submitters.\"{upper}\"]\nsigner = {{ kind = \"env\", env = \"K\" }}\n");
    let err = parse(&text).expect_err("must be rejected");
    let line = err.to_string();
    assert!(
        line.contains(upper) && line.contains(DEV),
        "both spellings named: {line}"
    );
    assert!(err
        .issues
        .iter()
        .any(|i| i.key.starts_with("submitters.") && i.reason.contains("duplicate")));
}

#[test]
fn checksummed_address_is_normalised() {
    let text = BASE.replace(DEV, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
    let config = parse(&text).expect("checksummed key");
    assert!(config.submitters.contains_key(DEV));
    assert!(config
        .submitter("0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266")
        .is_some());
}

#[test]
fn missing_signer_is_rejected() {
    let text = format!("{BASE}\n[submitters.\"{OTHER}\"]\nmax_in_flight = 1\n");
    assert_rejects(&text, &format!("submitters.{OTHER}.signer"));
}

#[test]
fn bad_signer_kind_is_rejected() {
    let text = BASE.replace("kind = \"env\"", "kind = \"hsm\"");
    assert_rejects(&text, &format!("submitters.{DEV}.signer.kind"));
}

#[test]
fn signer_fields_are_checked() {
    let remote = |extra: &str| {
        BASE.replace(
            "{ kind = \"env\", env = \"TXMGR_DEV_PRIVATE_KEY\" }",
            &format!("{{ kind = \"remote\", url = \"https://u:pw@signer:9000\"{extra} }}"),
        )
    };
    let config = parse(&remote(&format!(
        ", address = \"{}\"",
        DEV.to_uppercase().replace("0X", "0x")
    )))
    .expect("remote signer");
    assert!(!format!("{config:?}").contains("pw@"));
    assert!(!config.redacted_toml().contains(":pw@"));
    let signer_key = format!("submitters.{DEV}.signer");
    assert_rejects(
        &remote(&format!(", address = \"{OTHER}\"")),
        &format!("{signer_key}.address"),
    );
    assert_rejects(&remote(", port = 1"), &format!("{signer_key}.port"));
    assert_rejects(
        &BASE.replace("https", "ftp").replace(
            "kind = \"env\", env = \"TXMGR_DEV_PRIVATE_KEY\"",
            "kind = \"remote\", url = \"ftp://x\"",
        ),
        &format!("{signer_key}.url"),
    );
    let err = assert_rejects(
        &BASE.replace(
            "\"TXMGR_DEV_PRIVATE_KEY\"",
            "\"0xac0974bec39a17e36ba4a6b4d238ff944bacb478\"",
        ),
        &format!("{signer_key}.env"),
    );
    assert!(
        !err.to_string().contains("ac0974bec"),
        "never echo what may be a key: {err}"
    );
}

#[test]
fn submitter_overrides_merge_with_defaults() {
    let text = format!(
        "{BASE}max_in_flight = 1\nadvance_after = \"confirmed\"\nfinality = \"finalized\"\n\
         gas_bump = {{ enabled = true }}\n\n\
         [submitters.\"{OTHER}\"]\nsigner = {{ kind = \"keystore\", path = \"/k.json\", password_env = \"PW\" }}\n\n\
         [defaults]\nresubmit_interval = \"30s\"\n"
    );
    let config = parse(&text).expect("overrides");
    let dev = config.submitter(DEV).expect("dev");
    assert!(dev.settings.is_strict());
    assert!(
        dev.settings.hold_slot_until_final,
        "advance_after = \"confirmed\""
    );
    assert_eq!(dev.settings.finality, Finality::Tag(FinalityTag::Finalized));
    assert!(dev.settings.gas_bump.enabled);
    assert_eq!(dev.settings.gas_bump.multiplier, 1.125);
    assert_eq!(dev.settings.resubmit_interval, Duration::from_secs(30));
    let other = config.submitter(OTHER).expect("other");
    assert_eq!(other.settings, config.defaults);
    assert_eq!(other.signer.kind(), "keystore");
    assert_eq!(config.resolved_submitters().len(), 2);
}

//! Unit tests of `apron.toml`: defaults, a full file read and printed back,
//! every kind of rejection naming file, line and key, and the team and GPU
//! cost rules.

use super::*;

/// A file giving every key: the example of docs/src/configuration.md, then the rest.
const FULL: &str = r#"currency = "EUR"

[idle]
threshold_pct = 7.5

[energy]
price_per_kwh = 0.31
pue = 1.2

[[gpu_cost]]
model = "NVIDIA H100 80GB HBM3"
purchase_price = 30000
lifetime_years = 3
ops_per_gpu_hour = 0.25

[[gpu_cost]]
model = "*"
purchase_price = 12000
lifetime_years = 5
ops_per_gpu_hour = 0.1

[[team]]
name = "vision"
users = ["alice", "bob"]
uids = [1001]
k8s_namespaces = ["vision-*"]
slurm_accounts = ["vision"]

[[team]]
name = "nlp"
users = ["carol"]
k8s_namespaces = ["nlp", "lang-??"]

[zombie]
min_mem_mib = 512
min_idle = "15m"

[reclaim]
for = "3h"

[alerts]
low_usage_1h = 5
low_usage_4h = 12
high_usage_15m = 90
no_data = "15m"
"#;

fn parse(text: &str) -> Result<Config, Error> {
    Config::from_toml(text, Path::new("apron.toml"))
}

/// The one line a bad `text` is refused with.
fn refusal(text: &str) -> String {
    let err = parse(text).expect_err("the file is refused");
    assert!(matches!(err, Error::Config(ConfigError::Invalid { .. })), "{err:?}");
    err.to_string()
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::default();
    assert_eq!(c.source, Source::Defaults);
    assert_eq!(c.source.to_string(), "defaults");
    assert_eq!(c.currency, "USD");
    assert_eq!(c.idle.threshold_pct, 5.0);
    assert_eq!(c.energy.price_per_kwh, 0.15);
    assert_eq!(c.energy.pue, 1.4);
    assert_eq!(c.zombie.min_mem_mib, 256);
    assert_eq!(c.zombie.min_idle, Duration::from_secs(600));
    assert_eq!(c.reclaim.idle_for, Duration::from_secs(7200));
    assert_eq!((c.alerts.low_usage_1h, c.alerts.low_usage_4h, c.alerts.high_usage_15m), (10.0, 10.0, 80.0));
    assert_eq!(c.alerts.no_data, Duration::from_secs(300));
    assert_eq!(c.gpu_cost.len(), 1);
    let cost = &c.gpu_cost[0];
    assert_eq!(
        (cost.model.as_str(), cost.purchase_price, cost.lifetime_years, cost.ops_per_gpu_hour),
        ("*", 25_000.0, 4.0, 0.20)
    );
    assert!(c.team.is_empty());
}

#[test]
fn an_empty_file_gives_the_defaults_from_that_file() {
    let c = parse("").expect("an empty file is valid");
    assert_eq!(c.source, Source::File("apron.toml".into()));
    assert_eq!(Config { source: Source::Defaults, ..c }, Config::default());
    // An explicit empty list still gets the default entry.
    let c = parse("gpu_cost = []").expect("valid");
    assert_eq!(c.gpu_cost, Config::default().gpu_cost);
}

#[test]
fn a_partial_file_keeps_the_other_defaults() {
    let c = parse("[energy]\npue = 1.1\n").expect("valid");
    assert_eq!(c.energy.pue, 1.1);
    assert_eq!(c.energy.price_per_kwh, 0.15);
    assert_eq!(c.idle.threshold_pct, 5.0);
}

#[test]
fn a_full_file_is_read_and_printed_back_the_same() {
    let c = parse(FULL).expect("the full example is valid");
    assert_eq!(c.currency, "EUR");
    assert_eq!(c.idle.threshold_pct, 7.5);
    assert_eq!((c.energy.price_per_kwh, c.energy.pue), (0.31, 1.2));
    assert_eq!(c.gpu_cost.len(), 2);
    assert_eq!(c.gpu_cost[0].model, "NVIDIA H100 80GB HBM3");
    assert_eq!(c.gpu_cost[0].purchase_price, 30_000.0);
    assert_eq!(c.gpu_cost[1].lifetime_years, 5.0);
    assert_eq!(c.team.len(), 2);
    assert_eq!(c.team[0].users, ["alice", "bob"]);
    assert_eq!(c.team[0].uids, [1001]);
    assert_eq!(c.team[0].k8s_namespaces[0].as_str(), "vision-*");
    assert_eq!(c.team[0].slurm_accounts, ["vision"]);
    assert!(c.team[1].slurm_accounts.is_empty());
    assert_eq!(c.zombie.min_mem_mib, 512);
    assert_eq!(c.zombie.min_idle, Duration::from_secs(15 * 60));
    assert_eq!(c.reclaim.idle_for, Duration::from_secs(3 * 3600));
    assert_eq!((c.alerts.low_usage_1h, c.alerts.low_usage_4h, c.alerts.high_usage_15m), (5.0, 12.0, 90.0));
    assert_eq!(c.alerts.no_data, Duration::from_secs(15 * 60));

    let printed = c.to_toml().expect("prints");
    assert_eq!(printed.lines().next(), Some("# apron configuration: apron.toml"));
    assert!(printed.contains("for = \"3h\""), "{printed}");
    assert!(printed.contains("min_idle = \"15m\""), "{printed}");
    assert_eq!(parse(&printed).expect("the printed form reads back"), c);

    let json: serde_json::Value =
        serde_json::from_str(&c.to_json().expect("prints")).expect("one JSON value");
    assert_eq!(json["source"], "apron.toml");
    assert_eq!(json["energy"]["pue"], 1.2);
    assert_eq!(json["reclaim"]["for"], "3h");
    assert_eq!(json["team"][1]["name"], "nlp");
}

#[test]
fn the_defaults_print_back_as_the_defaults() {
    let printed = Config::default().to_toml().expect("prints");
    assert!(printed.starts_with("# apron configuration: defaults"), "{printed}");
    assert!(printed.contains("unassigned"), "{printed}");
    let back = parse(&printed).expect("reads back");
    assert_eq!(Config { source: Source::Defaults, ..back }, Config::default());
}

#[test]
fn an_unknown_key_is_named_with_its_line_and_table() {
    let text = "currency = \"USD\"\n\n[idle]\nthreshold_pct = 5\n\n[energy]\nprise_per_kwh = 0.2\n";
    let line = refusal(text);
    assert!(line.starts_with("apron.toml:7: unknown key `prise_per_kwh` in [energy]"), "{line}");
    let line = refusal("curency = \"USD\"\n");
    assert!(line.starts_with("apron.toml:1: unknown key `curency` at the top level"), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nuser = [\"x\"]\n");
    assert!(line.starts_with("apron.toml:3: unknown key `user` in [[team]]"), "{line}");
    let line = refusal("[zombie]\nmin_mem_mib = 1\n[zombi]\n");
    assert!(line.starts_with("apron.toml:3: unknown key `zombi` at the top level"), "{line}");
}

#[test]
fn a_wrong_type_is_named() {
    let line = refusal("currency = \"USD\"\n[idle]\nthreshold_pct = \"five\"\n");
    assert!(line.starts_with("apron.toml:3: `threshold_pct`: expected a number"), "{line}");
    let line = refusal("[zombie]\nmin_mem_mib = 2.5\n");
    assert!(line.starts_with("apron.toml:2: `min_mem_mib`: expected a whole number"), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nusers = \"alice\"\n");
    assert!(line.starts_with("apron.toml:3: `users`: expected an array"), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nuids = [\"x\"]\n");
    assert!(line.starts_with("apron.toml:3: `uids`: expected a whole number"), "{line}");
    let line = refusal("idle = 5\n");
    assert!(line.starts_with("apron.toml:1: `idle`: expected an [idle] table"), "{line}");
}

#[test]
fn a_negative_price_is_refused() {
    let mut text = String::from("[energy]\nprice_per_kwh = 0.1\n\n");
    text.push_str(
        "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = -1\nlifetime_years = 4\nops_per_gpu_hour = 0\n",
    );
    assert_eq!(refusal(&text), "apron.toml:6: `purchase_price` must not be negative");
    assert_eq!(
        refusal("[energy]\nprice_per_kwh = -0.1\n"),
        "apron.toml:2: `price_per_kwh` must not be negative"
    );
    assert_eq!(refusal("[energy]\npue = 0.9\n"), "apron.toml:2: `pue` must be at least 1");
    assert_eq!(
        refusal("[idle]\nthreshold_pct = 101\n"),
        "apron.toml:2: `threshold_pct` must be between 0 and 100"
    );
    assert_eq!(refusal("[zombie]\nmin_mem_mib = -3\n"), "apron.toml:2: `min_mem_mib` must not be negative");
    assert_eq!(refusal("[energy]\npue = nan\n"), "apron.toml:2: `pue` must be a finite number");
}

#[test]
fn every_number_has_a_plausible_range() {
    let cost = |key: &str, value: &str| {
        let mut entry =
            vec![("purchase_price", "25000"), ("lifetime_years", "4"), ("ops_per_gpu_hour", "0.2")];
        for e in &mut entry {
            if e.0 == key {
                e.1 = value;
            }
        }
        let mut text = String::from("[[gpu_cost]]\nmodel = \"*\"\n");
        for (k, v) in entry {
            text.push_str(&format!("{k} = {v}\n"));
        }
        text
    };
    let cases: Vec<(String, &str)> = vec![
        ("[energy]\npue = 1e300\n".into(), "apron.toml:2: `pue` must be at most 3"),
        ("[energy]\npue = 3.01\n".into(), "apron.toml:2: `pue` must be at most 3"),
        (
            "[energy]\nprice_per_kwh = 100001\n".into(),
            "apron.toml:2: `price_per_kwh` must be at most 100,000",
        ),
        ("[energy]\nprice_per_kwh = inf\n".into(), "apron.toml:2: `price_per_kwh` must be a finite number"),
        (cost("purchase_price", "1e308"), "apron.toml:3: `purchase_price` must be at most 10,000,000,000"),
        (cost("purchase_price", "-0.01"), "apron.toml:3: `purchase_price` must not be negative"),
        (cost("lifetime_years", "0.09"), "apron.toml:4: `lifetime_years` must be at least 0.1"),
        (cost("lifetime_years", "0"), "apron.toml:4: `lifetime_years` must be at least 0.1"),
        (cost("lifetime_years", "51"), "apron.toml:4: `lifetime_years` must be at most 50"),
        (cost("ops_per_gpu_hour", "1000001"), "apron.toml:5: `ops_per_gpu_hour` must be at most 1,000,000"),
        (cost("ops_per_gpu_hour", "-1"), "apron.toml:5: `ops_per_gpu_hour` must not be negative"),
        (
            "[zombie]\nmin_mem_mib = 1048577\n".into(),
            "apron.toml:2: `min_mem_mib` must be at most 1,048,576 (1 TiB)",
        ),
        ("[zombie]\nmin_idle = \"367d\"\n".into(), "apron.toml:2: `min_idle` must be at most 366 days"),
        ("[reclaim]\nfor = \"100000y\"\n".into(), "apron.toml:2: `for` must be at most 366 days"),
        (
            "[alerts]\nhigh_usage_15m = 1e300\n".into(),
            "apron.toml:2: `high_usage_15m` must be between 0 and 100",
        ),
        (
            "[alerts]\nno_data = \"7d\"\n".into(),
            "apron.toml:2: `no_data` must be shorter than 7 days, the rule's look-back",
        ),
        ("[alerts]\nno_data = \"0s\"\n".into(), "apron.toml:2: `no_data` must be longer than zero"),
    ];
    for (text, want) in cases {
        assert_eq!(refusal(&text), want, "{text}");
    }
    // The bounds themselves are accepted.
    let edge = "[energy]\nprice_per_kwh = 100000\npue = 3\n\n[zombie]\nmin_mem_mib = 1048576\nmin_idle = \"366d\"\n\n\
                [[gpu_cost]]\nmodel = \"*\"\npurchase_price = 1e10\nlifetime_years = 0.1\nops_per_gpu_hour = 1e6\n";
    let config = parse(edge).expect("the bounds are accepted");
    assert_eq!(config.gpu_cost[0].purchase_price, MAX_PURCHASE_PRICE);
    assert_eq!(config.energy.pue, MAX_PUE);
    let edge = "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 50\nops_per_gpu_hour = 0\n";
    assert!(parse(edge).is_ok());
}

#[test]
fn a_nameless_team_is_refused() {
    let text = "[[team]]\nname = \"a\"\n\n[[team]]\nusers = [\"x\"]\n";
    // The line of the entry's `[[team]]` header.
    assert_eq!(refusal(text), "apron.toml:4: team rule without a `name`");
    assert_eq!(refusal("[[team]]\nname = \"\"\n"), "apron.toml:2: `name` must not be empty");
    assert_eq!(
        refusal("[[gpu_cost]]\nmodel = \"*\"\n"),
        "apron.toml:1: gpu_cost entry without a `purchase_price`"
    );
}

#[test]
fn a_bad_duration_is_refused() {
    let line = refusal("[zombie]\nmin_idle = \"ten minutes\"\n");
    assert!(line.starts_with("apron.toml:2: `min_idle`: expected a duration such as \"10m\""), "{line}");
    let line = refusal("[reclaim]\nfor = 2\n");
    assert!(line.starts_with("apron.toml:2: `for`: expected a duration"), "{line}");
    assert_eq!(refusal("[reclaim]\nfor = \"0s\"\n"), "apron.toml:2: `for` must be longer than zero");
}

#[test]
fn bad_toml_and_bad_patterns_are_refused_with_a_line() {
    let line = refusal("currency = \"USD\"\n[energy\n");
    assert!(line.starts_with("apron.toml:2: invalid TOML: "), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nk8s_namespaces = [\"[x\"]\n");
    assert!(line.starts_with("apron.toml:3: `k8s_namespaces` has an invalid pattern \"[x\""), "{line}");
}

#[test]
fn every_refusal_is_one_line() {
    for text in ["[energy\n", "x = 1\n", "[idle]\nthreshold_pct = \"x\"\n", "[[team]]\nusers = []\n"] {
        let line = refusal(text);
        assert!(!line.contains('\n'), "{line:?}");
    }
}

fn teams() -> Config {
    parse(FULL).expect("the full example is valid")
}

/// The team of a process with these attributes and no labels.
fn team4<'c>(
    config: &'c Config,
    user: Option<&str>,
    uid: Option<i64>,
    k8s_namespace: Option<&str>,
    slurm_account: Option<&str>,
) -> &'c str {
    team_of(config, &Who { user, uid, k8s_namespace, k8s_labels: None, slurm_account })
}

#[test]
fn a_label_rule_needs_every_label_of_the_team() {
    let c = parse(
        "[[team]]\nname = \"serving\"\nk8s_labels = { team = \"nlp\", tier = \"prod\" }\n\
         [[team]]\nname = \"nlp\"\nk8s_labels = { team = \"nlp\" }\n\
         [[team]]\nname = \"cv\"\nk8s_namespaces = [\"cv\"]\nk8s_labels = { \"example.com/cost-center\" = \"cv.1\" }\n",
    )
    .expect("valid");
    let team = |ns: Option<&str>, labels: Option<&str>| {
        team_of(&c, &Who { k8s_namespace: ns, k8s_labels: labels, ..Who::default() })
    };
    assert_eq!(team(None, Some("team=nlp,tier=prod")), "serving");
    assert_eq!(team(None, Some("app=x,team=nlp,tier=dev")), "nlp");
    assert_eq!(team(None, Some("team=nlpx")), UNASSIGNED);
    assert_eq!(team(None, Some("example.com/cost-center=cv.1")), "cv");
    assert_eq!(team(None, Some("example.com/cost-center=cvx1")), UNASSIGNED);
    // Any one rule: the namespace alone, or the label alone.
    assert_eq!(team(Some("cv"), None), "cv");
    assert_eq!(team(None, None), UNASSIGNED);
    // The file's order decides: serving's two labels come before nlp's one.
    assert_eq!(team(Some("cv"), Some("team=nlp,tier=prod")), "serving");
}

#[test]
fn a_label_that_kubernetes_would_refuse_is_refused_with_its_line() {
    let line = refusal("[[team]]\nname = \"a\"\nk8s_labels = { \"te am\" = \"x\" }\n");
    assert!(line.starts_with("apron.toml:3: `k8s_labels` has an invalid label key \"te am\""), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nk8s_labels = { team = \"a,b\" }\n");
    assert!(line.contains("invalid value \"a,b\" for label \"team\""), "{line}");
    let line = refusal("[[team]]\nname = \"a\"\nk8s_labels = { team = 3 }\n");
    assert!(line.starts_with("apron.toml:3:"), "{line}");
}

#[test]
fn a_team_matches_on_any_rule() {
    let c = teams();
    assert_eq!(team4(&c, Some("alice"), None, None, None), "vision");
    assert_eq!(team4(&c, None, Some(1001), None, None), "vision");
    assert_eq!(team4(&c, None, None, Some("vision-train"), None), "vision");
    assert_eq!(team4(&c, None, None, None, Some("vision")), "vision");
    assert_eq!(team4(&c, Some("carol"), None, None, None), "nlp");
    assert_eq!(team4(&c, Some("nobody"), Some(1002), Some("ops"), Some("ops")), UNASSIGNED);
    assert_eq!(team4(&c, None, None, None, None), "unassigned");
    assert_eq!(team4(&Config::default(), Some("alice"), Some(0), Some("vision-a"), None), "unassigned");
}

#[test]
fn the_first_matching_team_wins() {
    let c = teams();
    // carol is nlp's, but the namespace is vision's, and vision comes first.
    assert_eq!(team4(&c, Some("carol"), None, Some("vision-x"), None), "vision");
    // Swapping the order swaps the owner.
    let mut swapped = c.clone();
    swapped.team.reverse();
    assert_eq!(team4(&swapped, Some("carol"), None, Some("vision-x"), None), "nlp");
}

#[test]
fn namespaces_are_glob_patterns() {
    let c = teams();
    assert_eq!(team4(&c, None, None, Some("vision-"), None), "vision");
    assert_eq!(team4(&c, None, None, Some("vision"), None), "unassigned");
    assert_eq!(team4(&c, None, None, Some("xvision-a"), None), "unassigned");
    assert_eq!(team4(&c, None, None, Some("nlp"), None), "nlp");
    assert_eq!(team4(&c, None, None, Some("nlp-dev"), None), "unassigned");
    assert_eq!(team4(&c, None, None, Some("lang-en"), None), "nlp");
    assert_eq!(team4(&c, None, None, Some("lang-eng"), None), "unassigned");
    // User names and accounts are exact, not patterns.
    assert_eq!(team4(&c, Some("alic*"), None, None, Some("vis*")), "unassigned");
}

#[test]
fn the_first_matching_gpu_cost_wins_and_star_matches_any() {
    let c = teams();
    assert_eq!(gpu_cost_for(&c, "NVIDIA H100 80GB HBM3").purchase_price, 30_000.0);
    assert_eq!(gpu_cost_for(&c, "NVIDIA A100-SXM4-40GB").purchase_price, 12_000.0);
    assert_eq!(gpu_cost_for(&c, "").model, "*");
    // A "*" entry first shadows every entry after it.
    let mut star_first = c.clone();
    star_first.gpu_cost.reverse();
    assert_eq!(gpu_cost_for(&star_first, "NVIDIA H100 80GB HBM3").purchase_price, 12_000.0);
    // No "*" entry: an unmatched model gets the built-in default.
    let mut no_star = c.clone();
    no_star.gpu_cost.pop();
    assert_eq!(gpu_cost_for(&no_star, "NVIDIA A100-SXM4-40GB"), &*DEFAULT_GPU_COST);
    assert_eq!(gpu_cost_for(&Config::default(), "anything").purchase_price, 25_000.0);
}

#[test]
fn load_names_a_missing_file_and_records_the_source() {
    let err = Config::load(Some(Path::new("/nonexistent/apron.toml"))).expect_err("no such file");
    assert!(matches!(err, Error::Config(ConfigError::Read { .. })), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/apron.toml"), "{err}");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("my.toml");
    std::fs::write(&path, "currency = \"CHF\"\n").expect("write");
    let c = Config::load(Some(&path)).expect("loads");
    assert_eq!(c.currency, "CHF");
    assert_eq!(c.source, Source::File(path.clone()));
    assert_eq!(c.source.to_string(), path.display().to_string());
}

#[test]
fn a_gpu_second_costs_its_write_off_and_its_operation() {
    let cost = GpuCost {
        model: "*".into(),
        purchase_price: SECONDS_PER_YEAR,
        lifetime_years: 1.0,
        ops_per_gpu_hour: 3.6,
        ops_avoidable: false,
    };
    assert!((rate_per_second(&cost) - 1.001).abs() < 1e-12);
}

#[test]
fn the_starved_threshold_is_whole_mib_per_second_up_to_a_tib() {
    assert_eq!(Config::default().zombie.starved_pcie_mib_per_s, 100);
    let c = parse("[zombie]\nstarved_pcie_mib_per_s = 0\n").expect("0 turns it off");
    assert_eq!(c.zombie.starved_pcie_mib_per_s, 0);
    let c = parse("[zombie]\nstarved_pcie_mib_per_s = 1048576\n").expect("1 TiB/s");
    assert_eq!(c.zombie.starved_pcie_mib_per_s, 1 << 20);
    let printed = c.to_toml().expect("prints");
    assert!(printed.contains("starved_pcie_mib_per_s = 1048576"), "{printed}");
    assert_eq!(
        refusal("[zombie]\nstarved_pcie_mib_per_s = 1048577\n"),
        "apron.toml:2: `starved_pcie_mib_per_s` must be at most 1,048,576 (1 TiB/s)"
    );
    assert_eq!(
        refusal("[zombie]\nstarved_pcie_mib_per_s = -1\n"),
        "apron.toml:2: `starved_pcie_mib_per_s` must not be negative"
    );
    let line = refusal("[zombie]\nstarved_pcie_mib_per_s = 2.5\n");
    assert!(line.starts_with("apron.toml:2: `starved_pcie_mib_per_s`"), "{line}");
}

#[test]
fn operating_cost_is_avoidable_only_where_the_entry_says_so() {
    let entry =
        "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 1\nops_per_gpu_hour = 3.6\n";
    let c = parse(entry).expect("a valid file");
    assert!(!c.gpu_cost[0].ops_avoidable, "not avoidable unless said");
    assert_eq!(avoidable_rate_per_second(&c.gpu_cost[0]), 0.0);
    let c = parse(&format!("{entry}ops_avoidable = true\n")).expect("a valid file");
    assert!((avoidable_rate_per_second(&c.gpu_cost[0]) - 0.001).abs() < 1e-15);
    assert_eq!(
        refusal(&format!("{entry}ops_avoidable = \"yes\"\n")),
        "apron.toml:6: `ops_avoidable`: expected a boolean, found string \"yes\""
    );
}

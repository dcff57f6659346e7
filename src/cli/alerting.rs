//! The alert flags shared by `monitor` and `run` (`--alertmanager`, `--alert-for`,
//! `--alert-resend`).

use std::time::Duration;

use probelet::alerts::alertmanager::{AlertMetrics, Endpoint, Sender};
use probelet::alerts::lifecycle::AlertConfig;

/// Where alerts go and how they are timed.
#[derive(Debug, Clone, clap::Args)]
pub struct AlertArgs {
    /// Send alerts to this Alertmanager (`http://HOST:PORT[/PREFIX]`, POST /api/v2/alerts);
    /// repeat for several. A firing alert is re-sent every --alert-resend and resolved on
    /// recovery.
    #[arg(long = "alertmanager", value_name = "URL", value_parser = parse_endpoint)]
    pub alertmanager: Vec<Endpoint>,

    /// How long a target (or container) must stay down before its alert fires; `0` fires
    /// on the transition itself.
    #[arg(long, default_value = "0s", value_parser = probelet::display::parse_duration)]
    pub alert_for: Duration,

    /// How often a firing alert is sent again (its `endsAt` is 4 times this ahead, as
    /// Prometheus does).
    #[arg(long, default_value = "1m", value_parser = probelet::display::parse_duration)]
    pub alert_resend: Duration,
}

impl AlertArgs {
    /// The lifecycle's timing.
    pub fn config(&self) -> AlertConfig {
        AlertConfig {
            for_duration: self.alert_for,
            resend: self.alert_resend.max(Duration::from_secs(1)),
            ..AlertConfig::default()
        }
    }

    /// One posting task per Alertmanager (none without `--alertmanager`). Needs a runtime.
    pub fn sender(&self, metrics: AlertMetrics) -> Option<Sender> {
        (!self.alertmanager.is_empty()).then(|| Sender::spawn(self.alertmanager.clone(), metrics))
    }
}

fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    Endpoint::parse(text).map_err(|e| probelet::display::error_chain(&e))
}

/// `run`: with `--alertmanager`, starts the task that turns the API's pods into alerts.
pub fn start_run_alerts(
    args: &AlertArgs,
    store: Option<std::sync::Arc<probelet::api::store::ApiStore>>,
) {
    let Some(sender) = args.sender(AlertMetrics::default()) else {
        return;
    };
    match store {
        Some(store) => {
            let lifecycle = probelet::alerts::lifecycle::Lifecycle::new(args.config());
            tokio::spawn(probelet::alerts::pods::watch_store(
                store, lifecycle, sender,
            ));
        }
        None => eprintln!("warning: --alertmanager needs the API (--listen): no alerts are sent"),
    }
}

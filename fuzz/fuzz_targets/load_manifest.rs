//! Any bytes through the loader, defaults, validation and the effective view: must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use probelet::spec::{effective, load, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(loaded) = load::load_str("fuzz.yaml", text) {
        for t in &loaded.templates {
            for e in validate::validate_template(t) {
                let _ = e.to_string();
            }
            let eff = effective::effective_template(t);
            for c in &eff.containers {
                for (_, p) in c.probes() {
                    let _ = effective::handler_summary(p);
                }
            }
        }
    }
});

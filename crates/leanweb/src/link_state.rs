//! Whether a frame written to our TAP device now reaches the link, read from sysfs.
//!
//! Attaching to a TAP device turns its carrier on, but the kernel marks it operationally up,
//! and a bridge starts forwarding from it, only when its link-watch work runs, a little
//! later. A bridge drops what a port sends while it is disabled, so an announcement
//! written right after attaching is lost: neighbours that cached a previous leanweb's MAC
//! for our addresses keep sending there until their entry goes stale and fails, tens of
//! seconds (docs/leanweb.md, "Start").
use std::path::Path;
use std::time::{Duration, Instant};

/// The interfaces' directory of the network namespace we run in (`ip netns exec` mounts
/// the namespace's own sysfs).
pub const SYSFS_NET: &str = "/sys/class/net";
/// `BR_STATE_FORWARDING` in `brport/state` (include/uapi/linux/if_bridge.h).
const BRIDGE_PORT_FORWARDING: &str = "3";

/// True once `name`'s operational state is up (or unknown, as for a device that does not
/// report one: the bridge treats it as up too) and, if it is a bridge port, that port
/// forwards. False while either file says otherwise or cannot be read.
pub fn passes_frames(sysfs_net: &Path, name: &str) -> bool {
    let dev = sysfs_net.join(name);
    let read = |file: &str| std::fs::read_to_string(dev.join(file)).map(|s| s.trim().to_string());
    let oper_up = matches!(read("operstate").as_deref(), Ok("up") | Ok("unknown"));
    let forwarding = if dev.join("brport").is_dir() {
        read("brport/state").is_ok_and(|state| state == BRIDGE_PORT_FORWARDING)
    } else {
        true
    };
    oper_up && forwarding
}

/// Waits until `passes_frames`, checking every `step`; false if `timeout` passed first.
pub fn wait_passes_frames(sysfs_net: &Path, name: &str, timeout: Duration, step: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if passes_frames(sysfs_net, name) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// A fake /sys/class/net with one device.
    fn sysfs(tag: &str, operstate: &str, bridge_port_state: Option<&str>) -> PathBuf {
        let root = std::env::temp_dir().join(format!("leanweb-link-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("tap0")).unwrap();
        fs::write(root.join("tap0/operstate"), format!("{operstate}\n")).unwrap();
        if let Some(state) = bridge_port_state {
            fs::create_dir_all(root.join("tap0/brport")).unwrap();
            fs::write(root.join("tap0/brport/state"), format!("{state}\n")).unwrap();
        }
        root
    }

    #[test]
    fn a_bridge_port_passes_frames_only_once_up_and_forwarding() {
        // what the kernel shows right after we attach: carrier on, link watch not yet run
        let attached = sysfs("attached", "down", Some("0"));
        assert!(!passes_frames(&attached, "tap0"));
        let oper_up_port_disabled = sysfs("oper-up", "up", Some("0"));
        assert!(!passes_frames(&oper_up_port_disabled, "tap0"));
        let learning = sysfs("learning", "up", Some("2"));
        assert!(!passes_frames(&learning, "tap0"));
        let forwarding = sysfs("forwarding", "up", Some("3"));
        assert!(passes_frames(&forwarding, "tap0"));
        for root in [attached, oper_up_port_disabled, learning, forwarding] {
            fs::remove_dir_all(root).unwrap();
        }
    }

    #[test]
    fn a_device_outside_a_bridge_needs_only_its_operational_state() {
        let up = sysfs("alone-up", "up", None);
        assert!(passes_frames(&up, "tap0"));
        let unknown = sysfs("alone-unknown", "unknown", None);
        assert!(passes_frames(&unknown, "tap0"));
        let down = sysfs("alone-down", "down", None);
        assert!(!passes_frames(&down, "tap0"));
        assert!(!passes_frames(&down, "no-such-device"));
        for root in [up, unknown, down] {
            fs::remove_dir_all(root).unwrap();
        }
    }

    #[test]
    fn waiting_gives_up_after_its_timeout_and_sees_the_port_come_up() {
        let root = sysfs("wait", "down", Some("0"));
        let started = Instant::now();
        assert!(!wait_passes_frames(&root, "tap0", Duration::from_millis(30), Duration::from_millis(5)));
        assert!(started.elapsed() >= Duration::from_millis(30));
        fs::write(root.join("tap0/operstate"), "up\n").unwrap();
        fs::write(root.join("tap0/brport/state"), "3\n").unwrap();
        assert!(wait_passes_frames(&root, "tap0", Duration::from_millis(30), Duration::from_millis(5)));
        fs::remove_dir_all(root).unwrap();
    }
}

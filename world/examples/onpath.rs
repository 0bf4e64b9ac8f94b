use std::time::Instant;
use telos_world::game::{Character, from_state_json, to_state_json};
use telos_world::handoff::destination::apply_state_components;
use telos_world::handoff::snapshot::{PlayerSnapshot, sign_snapshot, verify_snapshot};
fn main() {
    let dir = std::path::PathBuf::from("/tmp/scratch/keys");
    let _ = std::fs::remove_dir_all(&dir);
    telos_world::handoff::keys::generate(&dir).unwrap();
    let keys = telos_world::handoff::keys::load(&dir).unwrap();
    let public = keys.snapshot_public();
    let ch = Character::new("Walker", "city:square");
    let n = 5000u64;
    let mut t = [0u128; 7];
    for e in 0..n {
        let t0 = Instant::now();
        let s = PlayerSnapshot::build(&ch, e, "a", "b", "forest:eaves", 1, e, "p", "c");
        let t1 = Instant::now();
        let enc = s.encode();
        let t2 = Instant::now();
        let sig = sign_snapshot(&keys.snapshot, &enc);
        let t3 = Instant::now();
        assert!(verify_snapshot(&public, &enc, &sig));
        let t4 = Instant::now();
        let d = PlayerSnapshot::decode(&enc).unwrap();
        let t5 = Instant::now();
        apply_state_components(&d).unwrap();
        let t6 = Instant::now();
        let _ = from_state_json(&to_state_json(&ch));
        let t7 = Instant::now();
        for (i, (a, b)) in [
            (t0, t1),
            (t1, t2),
            (t2, t3),
            (t3, t4),
            (t4, t5),
            (t5, t6),
            (t6, t7),
        ]
        .iter()
        .enumerate()
        {
            t[i] += (*b - *a).as_nanos();
        }
    }
    for (name, v) in [
        "build",
        "encode",
        "sign",
        "verify",
        "decode",
        "apply",
        "json roundtrip",
    ]
    .iter()
    .zip(t)
    {
        println!("{name}: {:.1} us", v as f64 / n as f64 / 1e3);
    }
    println!("state bytes {}", to_state_json(&ch).len());
}

//! The proactive mind's settings, read once a transaction (014): `proactive_setting` is asked
//! some two hundred times a tick, and a query each time was a tenth of the tick. The values are
//! the table's as the transaction first read them; a change the transaction makes itself
//! (`proactive_config_changed`, a statement trigger) is read at once, and a subtransaction that
//! rolls back forgets what it read.
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

pub mod rules;
use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    static SETTINGS: RefCell<Option<HashMap<String, f64>>> = const { RefCell::new(None) };
}

fn forget() {
    // (Never borrowed across a call that could end the transaction; try_ keeps a panic out of C.)
    SETTINGS.with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            *s = None;
        }
    });
}

unsafe extern "C-unwind" fn on_xact(_event: pg_sys::XactEvent::Type, _arg: *mut core::ffi::c_void) {
    forget();
}

unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    _sub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut core::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        forget();
    }
}

/// Called once a backend, from `_PG_init`: every end of a transaction forgets the settings.
pub fn register() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
    }
}

fn load() -> HashMap<String, f64> {
    Spi::connect(|c| {
        c.select("SELECT key, value FROM dionysus.proactive_config", None, &[])
            .expect("proactive_config")
            .filter_map(|t| Some((t.get::<String>(1).ok()??, t.get::<f64>(2).ok()??)))
            .collect()
    })
}

/// One value of proactive_config, as `proactive_setting` reads it.
pub fn setting(key: &str) -> f64 {
    dionysus_internal::proactive_setting(Some(key))
}

#[pg_schema]
pub mod dionysus_internal {
    use super::*;

    /// One value of proactive_config; an unknown key is an error naming it (42704), a null one
    /// 22004. Parallel restricted: a worker would read the table under a snapshot of its own.
    #[pg_extern(stable, parallel_restricted)]
    pub(crate) fn proactive_setting(setting_key: Option<&str>) -> f64 {
        let Some(key) = setting_key else { crate::errors::null_arg("setting_key") };
        if SETTINGS.with(|s| s.borrow().is_none()) {
            let read = load(); // (the query runs with nothing borrowed)
            SETTINGS.with(|s| *s.borrow_mut() = Some(read));
        }
        let v = SETTINGS.with(|s| s.borrow().as_ref().and_then(|m| m.get(key).copied()));
        v.unwrap_or_else(|| {
            crate::errors::raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
                format!("dionysus: proactive_config has no key \"{key}\""),
                None,
            )
        })
    }

    /// proactive_config changed in this transaction: the next read reads the table again.
    #[pg_extern(volatile, parallel_restricted)]
    fn forget_proactive_settings() {
        super::forget();
    }

    /// `rhythm_at` over a person's `person_rhythm` rows (hour of the week, activity, misses,
    /// as three arrays in one order), at an hour of their week: {learned, missed}.
    #[pg_extern(immutable, parallel_safe)]
    fn rhythm_at(
        hours: Vec<Option<i16>>,
        activity: Vec<Option<f64>>,
        misses: Vec<Option<f64>>,
        hour_of_week: i32,
        weekend: bool,
    ) -> Vec<f64> {
        fn whole<T: Copy>(arg: &str, v: Vec<Option<T>>) -> Vec<T> {
            v.into_iter().map(|x| x.unwrap_or_else(|| crate::errors::null_arg(&format!("{arg}[]")))).collect()
        }
        let (hours, activity, misses) = (whole("hours", hours), whole("activity", activity), whole("misses", misses));
        if activity.len() != hours.len() || misses.len() != hours.len() {
            crate::errors::invalid_arg("activity", "hours, activity and misses must be as long as each other");
        }
        if let Some(h) = hours.iter().find(|h| !(0..168).contains(*h)) {
            crate::errors::invalid_arg("hours", format!("{h} is not an hour of the week (0 to 167)"));
        }
        let mut seen = [false; 168];
        if let Some(h) = hours.iter().find(|&&h| std::mem::replace(&mut seen[h as usize], true)) {
            crate::errors::invalid_arg("hours", format!("hour {h} is given twice (one row an hour, as person_rhythm keeps them)"));
        }
        if !(0..168).contains(&hour_of_week) {
            crate::errors::invalid_arg("hour_of_week", format!("{hour_of_week} is not an hour of the week (0 to 167)"));
        }
        let (learned, missed) = super::rhythm_at(&hours, &activity, &misses, hour_of_week as usize, weekend);
        vec![learned, missed]
    }
}

/// What a person's learned rhythm says of one hour of their week (014's `availability` reads
/// the rows and blends this with the prior): `learned`, in [0, 1], and the contacts `missed`
/// there. The rhythm is read three ways, each relative to its busiest hour, neighbouring hours
/// counting half: this hour on days of the same kind (weekday or weekend; all days while that
/// kind has none), this hour of this weekday, this hour on any day (0.6, 0.2, 0.2). Misses count
/// at this hour of the week, and a quarter at the same hour on other days. (Rust: these loops
/// were most of a PL/pgSQL `availability`, which a tick runs for each person it evaluates.)
pub fn rhythm_at(hours: &[i16], activity: &[f64], misses: &[f64], hour_of_week: usize, weekend: bool) -> (f64, f64) {
    let (mut act, mut miss) = ([0.0f64; 168], [0.0f64; 168]);
    // Activity by hour of the day: any day, weekdays, weekend days.
    let mut by_hour = [[0.0f64; 24]; 3];
    let mut week_peak = 0.0f64;
    for ((&h, &a), &m) in hours.iter().zip(activity).zip(misses) {
        let h = h as usize;
        act[h] = a;
        miss[h] = m;
        week_peak = week_peak.max(a);
        by_hour[0][h % 24] += a;
        by_hour[if h >= 120 { 2 } else { 1 }][h % 24] += a;
    }
    let h = hour_of_week;
    let hod = h % 24;
    let near = |p: &[f64; 24], i: usize| p[i] + 0.5 * (p[(i + 23) % 24] + p[(i + 1) % 24]);
    let peak = |p: &[f64; 24]| (0..24).map(|i| near(p, i)).fold(0.0f64, f64::max);
    let relative = |here: f64, peak: f64| if peak > 0.0 { (here / peak).min(1.0) } else { 0.0 };
    let any = &by_hour[0];
    let mut kind = &by_hour[if weekend { 2 } else { 1 }];
    if peak(kind) == 0.0 {
        kind = any;
    }
    let week_here = act[h] + 0.5 * (act[(h + 167) % 168] + act[(h + 1) % 168]);
    let learned = 0.6 * relative(near(kind, hod), peak(kind))
        + 0.2 * relative(week_here, week_peak)
        + 0.2 * relative(near(any, hod), peak(any));
    let others: f64 = (0..7).map(|d| d * 24 + hod).filter(|&x| x != h).map(|x| miss[x]).sum();
    (learned, miss[h] + 0.25 * others)
}


#[cfg(test)]
mod rhythm_tests {
    use super::rhythm_at;

    #[test]
    fn nothing_learned_is_nothing() {
        assert_eq!(rhythm_at(&[], &[], &[], 30, false), (0.0, 0.0));
    }

    #[test]
    fn the_busiest_hour_is_one_and_a_neighbour_half_relative() {
        // Every weekday at 18:00 (hour of the week d*24+18), nothing else.
        let hours: Vec<i16> = (0..5).map(|d| d * 24 + 18).collect();
        let ones = vec![1.0; 5];
        let zeros = vec![0.0; 5];
        let (at_18, _) = rhythm_at(&hours, &ones, &zeros, 18, false);
        assert!((at_18 - 1.0).abs() < 1e-12, "{at_18}");
        // 19:00 on Monday: half of the peak in each profile.
        let (at_19, _) = rhythm_at(&hours, &ones, &zeros, 19, false);
        assert!((at_19 - 0.5).abs() < 1e-12, "{at_19}");
        // A Saturday at 18:00: no weekend activity yet, so weekdays stand in for the kind (0.6),
        // the week's own hour is empty (0), any day is the peak (0.2).
        let (sat, _) = rhythm_at(&hours, &ones, &zeros, 5 * 24 + 18, true);
        assert!((sat - 0.8).abs() < 1e-12, "{sat}");
    }

    #[test]
    fn a_miss_counts_whole_at_its_hour_and_a_quarter_on_other_days() {
        let (_, here) = rhythm_at(&[10, 34], &[0.0, 0.0], &[1.0, 2.0], 10, false);
        assert!((here - 1.5).abs() < 1e-12, "{here}");
        let (_, other) = rhythm_at(&[10, 34], &[0.0, 0.0], &[1.0, 2.0], 58, false);
        assert!((other - 0.75).abs() < 1e-12, "{other}");
    }
}

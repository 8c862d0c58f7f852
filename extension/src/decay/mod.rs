//! Memory that fades (sql/021_decay.sql): the rule and the pass are SQL over the memories
//! table; this module is the maintenance worker's step.
use pgrx::prelude::*;

/// The maintenance worker's step: a pass when one is due on the clock (decay_config.pass_interval).
pub fn step() {
    Spi::run("SELECT dionysus_internal.decay_step()").expect("decay step");
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    /// Short words need no model: they are their own summary and micro line, so they walk every
    /// stage on the clock alone, one stage a pass, and a pinned twin stays fresh throughout.
    #[pg_test]
    fn a_short_memory_walks_every_stage_one_pass_at_a_time() {
        Spi::run("SELECT dionysus.set_clock('2026-01-01 12:00+00')").unwrap();
        let id: pgrx::Uuid = one("SELECT dionysus.remember('We walked along the river at dusk.', importance => 0.0)");
        let pinned: pgrx::Uuid = one("SELECT dionysus.remember('The first snow fell on the garden.', importance => 0.0)");
        Spi::run(&format!("SELECT dionysus.pin('{pinned}')")).unwrap();
        let stage = |m: pgrx::Uuid| one::<String>(&format!("SELECT stage::text FROM dionysus.memories WHERE id = '{m}'"));
        Spi::run("SELECT dionysus.advance_clock('200 days'); SELECT dionysus.decay_pass()").unwrap();
        assert_eq!(stage(id), "fading", "one stage a pass, however old");
        Spi::run("SELECT dionysus.decay_pass()").unwrap();
        assert_eq!(stage(id), "distant");
        Spi::run("SELECT dionysus.decay_pass()").unwrap();
        assert!(!one::<bool>(&format!("SELECT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = '{id}')")), "forgotten");
        assert_eq!(one::<String>(&format!("SELECT dionysus.memory_stage('{id}') ->> 'stage'")), "forgotten");
        assert_eq!(stage(pinned), "fresh");
        assert_eq!(one::<String>(&format!("SELECT dionysus.memory_stage('{pinned}') ->> 'exempt'")), "pinned");
        Spi::run("SELECT dionysus.set_clock(NULL)").unwrap();
    }
}

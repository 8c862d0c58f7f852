//! The people in a person's life (sql/023_people.sql): resolution, merging and the lookup are
//! SQL over known_persons; this module holds their unit tests beside the code, on the real
//! extension.

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    /// "my Mother," and "Mom" both name Ada's mother once she has one; two mothers are two
    /// rows for two people, and a relation word with two people in it names nobody.
    #[pg_test]
    fn names_resolve_by_alias_then_by_the_one_person_in_a_relation() {
        assert_eq!(one::<String>("SELECT dionysus_internal.person_key('  My   Mother, ')"), "mother");
        let ana: pgrx::Uuid = one("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Ana\", \"relation\": \"mom\"}', NULL)");
        let same: pgrx::Uuid = one("SELECT dionysus_internal.resolve_person('test:ada', 'my Mother,')");
        assert_eq!(same, ana);
        assert_eq!(one::<String>(&format!("SELECT relation FROM dionysus.known_persons WHERE id = '{ana}'")), "mother");
        let bo_mom: pgrx::Uuid = one("SELECT dionysus_internal.note_person('test:bo', '{\"name\": \"Mom\"}', NULL)");
        assert_ne!(bo_mom, ana, "Bo's mother is not Ada's");
        assert!(Spi::get_one::<pgrx::Uuid>("SELECT dionysus_internal.resolve_person('test:bo', 'Ana')").unwrap().is_none());
        Spi::run("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Lea\", \"relation\": \"friend\"}', NULL)").unwrap();
        Spi::run("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Tom\", \"relation\": \"friend\"}', NULL)").unwrap();
        assert!(Spi::get_one::<pgrx::Uuid>("SELECT dionysus_internal.resolve_person('test:ada', 'my friend')").unwrap().is_none(),
                "two friends: 'my friend' is nobody in particular");
    }

    /// An item that names two known people as one merges them: aliases, mentions and sources
    /// move, the proper name wins over "Mom", relations follow.
    #[pg_test]
    fn an_item_naming_two_known_people_as_one_merges_them() {
        let mom: pgrx::Uuid = one("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Mom\", \"traits\": [\"worrier\"]}', NULL)");
        let ana: pgrx::Uuid = one("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Ana\", \"topics\": [\"garden\"]}', NULL)");
        assert_ne!(mom, ana);
        Spi::run("SELECT dionysus_internal.note_relation('test:ada', '{\"a\": \"Ana\", \"b\": \"Lea\", \"kind\": \"Worries about\"}', NULL)").unwrap();
        let kept: pgrx::Uuid = one("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Ana\", \"same_as\": \"Mom\"}', NULL)");
        assert_eq!(kept, mom, "the one known first keeps its id");
        assert_eq!(one::<i64>("SELECT count(*) FROM dionysus.known_persons WHERE of_person = 'test:ada' AND name IN ('Ana', 'Mom')"), 1);
        let p: pgrx::JsonB = one(&format!("SELECT dionysus_internal.person_json(p, true) FROM dionysus.known_persons p WHERE id = '{kept}'"));
        let p = p.0;
        assert_eq!(p["name"], "Ana");
        assert_eq!(p["relation"], "mother");
        assert_eq!(p["mentions"], 3);
        assert_eq!(p["aliases"], serde_json::json!(["Ana"]), "relation words are never aliases");
        assert_eq!(p["traits"], serde_json::json!(["worrier"]));
        assert_eq!(p["topics"], serde_json::json!(["garden"]));
        assert_eq!(p["relations"][0]["with"], "Lea");
        assert_eq!(p["relations"][0]["kind"], "worries_about");
        assert!(p["sources"].as_array().unwrap().iter().any(|s| s["what"] == "merged"), "{p}");
    }

    /// A relation item that cannot be placed is skipped, never the turn: the person themselves,
    /// an end with no letters, a relation word with two people in it, one person twice, a kind
    /// with no letters. No phantom people are made; any script's words are a kind; what the
    /// person said is never overwritten by an inference.
    #[pg_test]
    fn relations_skip_what_cannot_be_placed_and_said_outweighs_inferred() {
        Spi::run("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Lea\", \"relation\": \"friend\"}', NULL)").unwrap();
        Spi::run("SELECT dionysus_internal.note_person('test:ada', '{\"name\": \"Tom\", \"relation\": \"friend\"}', NULL)").unwrap();
        for item in [r#"{"a": "you", "b": "Lea", "kind": "likes"}"#, r#"{"a": "🙂", "b": "Lea", "kind": "likes"}"#,
                     r#"{"a": "my friend", "b": "Lea", "kind": "knows"}"#, r#"{"a": "Lea", "b": "lea", "kind": "knows"}"#,
                     r#"{"a": "Lea", "b": "Tom", "kind": "!!"}"#] {
            let id = Spi::get_one::<pgrx::Uuid>(&format!("SELECT dionysus_internal.note_relation('test:ada', '{item}', NULL)")).unwrap();
            assert!(id.is_none(), "{item} was placed");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM dionysus.known_persons"), 2, "a skipped item made someone");
        Spi::run(r#"SELECT dionysus_internal.note_relation('test:ada', '{"a": "Lea", "b": "Tom", "kind": "Братья"}', NULL)"#).unwrap();
        assert_eq!(one::<String>("SELECT string_agg(kind, ',') FROM dionysus.person_relations"), "братья");
        Spi::run(r#"SELECT dionysus_internal.note_relation('test:ada', '{"a": "Lea", "b": "Tom", "kind": "friends", "sentiment": 0.8, "source": "said"}', NULL)"#).unwrap();
        Spi::run(r#"SELECT dionysus_internal.note_relation('test:ada', '{"a": "Lea", "b": "Tom", "kind": "friends", "sentiment": -0.5}', NULL)"#).unwrap();
        let (sentiment, source) = Spi::get_two::<f32, String>("SELECT sentiment, source FROM dionysus.person_relations WHERE kind = 'friends'").unwrap();
        assert_eq!((sentiment, source.as_deref()), (Some(0.8), Some("said")), "an inference overwrote what was said");
    }

    /// Three names that mean one person merge in one item (name, same_as, the one known only as
    /// "Mom"); a relation both had with a third is kept once and one between them goes; two
    /// people's lives never merge.
    #[pg_test]
    fn merges_keep_relations_unique_and_never_cross_two_lives() {
        for item in [r#"{"name": "Mom"}"#, r#"{"name": "Ana"}"#, r#"{"name": "Annie"}"#, r#"{"name": "Lea"}"#] {
            Spi::run(&format!("SELECT dionysus_internal.note_person('test:ada', '{item}', NULL)")).unwrap();
        }
        for item in [r#"{"a": "Mom", "b": "Lea", "kind": "worries about"}"#, r#"{"a": "Ana", "b": "Lea", "kind": "worries about"}"#,
                     r#"{"a": "Annie", "b": "Ana", "kind": "knows"}"#] {
            Spi::run(&format!("SELECT dionysus_internal.note_relation('test:ada', '{item}', NULL)")).unwrap();
        }
        let kept: pgrx::Uuid = one(r#"SELECT dionysus_internal.note_person('test:ada', '{"name": "Ana", "same_as": "Annie", "relation": "mother"}', NULL)"#);
        assert_eq!(one::<i64>("SELECT count(*) FROM dionysus.known_persons"), 2, "Mom, Ana and Annie are one; Lea another");
        assert_eq!(one::<String>(&format!("SELECT name FROM dionysus.known_persons WHERE id = '{kept}'")), "Ana");
        assert_eq!(one::<String>("SELECT string_agg(kind, ',') FROM dionysus.person_relations"), "worries_about");
        assert_eq!(one::<String>(&format!("SELECT string_agg(alias, ',' ORDER BY alias) FROM dionysus.person_aliases WHERE known_person_id = '{kept}'")), "Ana,Annie");
        let bo: pgrx::Uuid = one(r#"SELECT dionysus_internal.note_person('test:bo', '{"name": "Sam"}', NULL)"#);
        Spi::run(&format!(
            "DO $$ BEGIN PERFORM dionysus_internal.merge_persons('{kept}', '{bo}', NULL); RAISE EXCEPTION 'two lives merged'; \
             EXCEPTION WHEN insufficient_privilege THEN NULL; END $$"
        ))
        .unwrap();
        assert_eq!(one::<i64>("SELECT count(*) FROM dionysus.known_persons WHERE of_person = 'test:bo'"), 1);
    }
}

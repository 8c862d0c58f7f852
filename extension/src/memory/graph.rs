//! The memory graph (typed, weighted edges) and concepts.
use super::{require_memory, validate};
use crate::errors;
use crate::neighborhoods;
use pgrx::prelude::*;
use crate::json_arg::JsonArg;
use pgrx::{JsonB, Uuid};

/// Connects two memories. Connecting the same (from, to, relation) again updates the edge's
/// weight and merges its properties instead of duplicating it. Returns true when the edge is new.
#[pg_extern(volatile, parallel_unsafe)]
fn connect(
    from_id: Option<Uuid>,
    to_id: Option<Uuid>,
    relation: default!(Option<&str>, "'ASSOCIATED'"),
    weight: default!(Option<f64>, 1.0),
    properties: default!(Option<JsonArg>, "'{}'"),
) -> bool {
    let from = require_memory("from_id", from_id);
    let to = require_memory("to_id", to_id);
    if from == to {
        errors::invalid_arg("to_id", "a memory cannot be connected to itself");
    }
    let relation = validate::relation("relation", relation);
    let weight = validate::unit("weight", weight);
    let properties = validate::object("properties", properties.map(|j| j.parse("properties")));
    let inserted = Spi::get_one_with_args::<bool>(
        "INSERT INTO dionysus.memory_edges (from_id, to_id, relation, weight, properties) \
         VALUES ($1, $2, $3::dionysus.edge_relation, $4, $5) \
         ON CONFLICT (from_id, to_id, relation) DO UPDATE SET \
           weight = EXCLUDED.weight, \
           properties = dionysus.memory_edges.properties || EXCLUDED.properties, \
           updated_at = now() \
         RETURNING (xmax = 0)",
        &[from.into(), to.into(), relation.into(), weight.into(), JsonB(properties).into()],
    )
    .expect("upsert edge")
    .unwrap_or(false);
    // Both ends, and what hangs off them (their 2-hop sets changed), see the new edge.
    neighborhoods::mark_graph_around(&[from, to]);
    inserted
}

fn concept(arg: &str, name: &str, parent: Option<Uuid>) -> Uuid {
    Spi::get_one_with_args::<Uuid>(
        "INSERT INTO dionysus.concepts (name, parent_id) VALUES ($1, $2) \
         ON CONFLICT (name_key) DO UPDATE SET parent_id = coalesce(EXCLUDED.parent_id, dionysus.concepts.parent_id) \
         RETURNING id",
        &[name.into(), parent.into()],
    )
    .unwrap_or_else(|e| errors::invalid_arg(arg, e))
    .expect("concept id")
}

/// Links a memory to a concept (created if new, optionally under a parent concept). Linking
/// again updates the strength. Returns the concept's id.
#[pg_extern(volatile, parallel_unsafe)]
fn link_concept(
    memory_id: Option<Uuid>,
    concept_name: Option<&str>,
    strength: default!(Option<f64>, 1.0),
    parent_concept: default!(Option<&str>, "NULL"),
) -> Uuid {
    let memory = require_memory("memory_id", memory_id);
    let name = validate::required_name("concept_name", concept_name);
    let strength = validate::unit("strength", strength);
    let parent = validate::optional_text("parent_concept", parent_concept).map(|p| {
        if p.to_lowercase() == name.to_lowercase() {
            errors::invalid_arg("parent_concept", "a concept cannot be its own parent");
        }
        concept("parent_concept", &p, None)
    });
    let id = concept("concept_name", &name, parent);
    Spi::run_with_args(
        "INSERT INTO dionysus.memory_concepts (memory_id, concept_id, strength) VALUES ($1, $2, $3) \
         ON CONFLICT (memory_id, concept_id) DO UPDATE SET strength = EXCLUDED.strength",
        &[memory.into(), id.into(), strength.into()],
    )
    .expect("link concept");
    id
}

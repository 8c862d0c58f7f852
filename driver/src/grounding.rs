//! The one grounding check, as the driver asks it (`dionysus.check_model_text`, the rule in
//! sql/032_grounding.sql): for what the driver stores through an API call of its own (a rule, a
//! censor) and for the model's words it says back (a confirmation), which no work item carries.
use crate::Mind;

/// Why a model's text may not be used (the refusal is written down), or None when it may. A
/// check that cannot run refuses (why says so): nothing unchecked is stored or said.
pub async fn refused(mind: &Mind, kind: &str, value: &str, source: Option<&str>, private_to: &[String]) -> Option<String> {
    let sql = "SELECT to_jsonb(dionysus.check_model_text($1, $2, $3, NULL, $4))";
    match mind.chat_db.one::<Option<String>>(sql, &[&kind, &value, &source, &private_to]).await {
        Ok(why) => why,
        Err(e) => {
            tracing::warn!(error = %e, "the grounding check could not run");
            Some(format!("the grounding check could not run: {e}"))
        }
    }
}

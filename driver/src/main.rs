//! `dionysus`: the thin driver beside PostgreSQL.
use dionysus_driver::channel::{discord::Discord, terminal::Terminal, Channel};
use dionysus_driver::config::{Config, LogFormat};
use dionysus_driver::{alignment, doctor, forgetme, heartbeat, import, mcp, reindex, runtime, status, Mind};
use std::fs::File;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

const USAGE: &str = "usage: dionysus [--config FILE] <command>

commands:
  run               everything: the conversation (Discord when a token is configured, else the
                    terminal), heartbeats, queued work and the outbox, until SIGTERM or Ctrl-C
                    (with stdin closed, e.g. as a service, all but the conversation goes on)
  chat [--json]     the same, with the terminal as the channel (--json: JSON lines in and out);
                    at the end of input (Ctrl-D) it answers what was said and stops
  heartbeat --once  run one heartbeat now and print what it did
  status            energy, goals, last heartbeats, queue, outbox, memory health, the mind
  why [PERSON]      why Dionysus wrote, or did not: the last evaluations of contact pressure
  rules PERSON      the rules acting on a person (theirs, the built-ins) and what it learned from their answers
  proposals         what the nightly dream proposes, waiting for your word
  approve ID        a proposal takes effect (a template's new version, an archetype)
  reject ID [WHY]   a proposal is declined
  export PERSON [--out FILE]
                    everything stored about one person as JSON (what they said, what was learned
                    from it, why each contact was made): what /forgetme would erase
  import PATH [--person KEY] [--author ID] [--dry-run]
                    bring a history in: a Discord data package, a chat JSON file (see the README)
                    or LoCoMo JSON, with original times and authors; resumable, idempotent
  reindex [--status | --cancel | --detach]
                    rebuild what the message log made (facts, triples, objectives, every
                    vector) with today's extraction template and embedding settings, in the
                    background; recall uses the old index until the swap; resumable
  mcp [--http [ADDR]]  the person's memory for other agents over MCP: stdio (what desktop
                    clients launch), or streamable HTTP on ADDR (default 127.0.0.1:8808; a bare
                    port stays on loopback) with the bearer token DIONYSUS_MCP_TOKEN; acts as
                    DIONYSUS_MCP_PERSON
  doctor            check PostgreSQL, pgvector, the extension, the worker, the embedding model,
                    the LLM endpoints and the Discord token

configuration: environment variables and an optional TOML file (--config or DIONYSUS_CONFIG);
every key is in the README. The essentials:
  DIONYSUS_DATABASE_URL   (default postgresql://postgres@127.0.0.1:5433/dionysus)
  DIONYSUS_LLM_BASE_URL   (default http://127.0.0.1:11434/v1, a local Ollama)
  DIONYSUS_FAST_MODEL / DIONYSUS_SMART_MODEL, DIONYSUS_LLM_API_KEY
  DIONYSUS_DISCORD_TOKEN, DIONYSUS_DISCORD_ALLOWED_USERS, DIONYSUS_DISCORD_HOME_CHANNEL,
  DIONYSUS_DISCORD_DREAM_CHANNEL (every autonomous activity as a card), DIONYSUS_DISCORD_DREAM_USER
  DIONYSUS_LOG_FILE       (while the conversation is on a terminal, the logs go there; default
                          ~/.local/state/dionysus/dionysus.log)";

/// Logs go to `file` when given, else to stderr.
fn init_logs(config: &Config, file: Option<File>) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DIONYSUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,serenity=warn,tokio_postgres=warn,reqwest=warn,hyper=warn,rustls=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match (file, config.log_format) {
        (Some(f), LogFormat::Json) => builder.with_writer(Mutex::new(f)).with_ansi(false).json().init(),
        (Some(f), LogFormat::Text) => builder.with_writer(Mutex::new(f)).with_ansi(false).init(),
        (None, LogFormat::Json) => builder.with_writer(std::io::stderr).json().init(),
        (None, LogFormat::Text) => builder.with_writer(std::io::stderr).init(),
    }
}

/// The log file, appended to, its directory created (None, said on stderr, if it cannot be).
fn open_log(path: &Path) -> Option<File> {
    let opened = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::OpenOptions::new().create(true).append(true).open(path));
    match opened {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("dionysus: cannot write the log file {}: {e}; logging to stderr", path.display());
            None
        }
    }
}

/// While the logs are in a file, the terminal still learns that the model is unreachable: one
/// line when it becomes so, one when it is back (when every role that failed has answered again).
async fn show_model_status(mind: Arc<Mind>, terminal: Arc<Terminal>) {
    let mut roles = [mind.chat.reachability(), mind.smart.reachability(), mind.fast.reachability()];
    let mut down = false;
    loop {
        let [chat, smart, fast] = &mut roles;
        let changed = tokio::select! {
            c = chat.changed() => c,
            c = smart.changed() => c,
            c = fast.changed() => c,
        };
        if changed.is_err() {
            return;
        }
        let unreachable = roles.iter().any(|r| *r.borrow() == Some(false));
        if unreachable != down {
            down = unreachable;
            terminal.notice(if down {
                "the language model is unreachable: I answer plainly until it is back (details in the log)"
            } else {
                "the language model is back"
            });
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut config_path = None;
    if let Some(i) = args.iter().position(|a| a == "--config") {
        if i + 1 >= args.len() {
            eprintln!("dionysus: --config needs a file\n\n{USAGE}");
            return ExitCode::from(2);
        }
        config_path = Some(args.remove(i + 1));
        args.remove(i);
    }
    let config = match Config::load(config_path.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dionysus: {e}");
            return ExitCode::from(2);
        }
    };
    let command = args.first().map(String::as_str);
    let json = args.iter().any(|a| a == "--json");
    let on_terminal = matches!(command, Some("run" | "chat")) && (command == Some("chat") || config.discord.token.is_none());
    // A conversation on this terminal keeps the logs out of it; a service, Discord and --json
    // (a script reading stdout) log to stderr.
    let log_path = if on_terminal && !json && std::io::stdout().is_terminal() { config.log_path() } else { None };
    let log_file = log_path.as_deref().and_then(open_log);
    let logs_in_file = log_file.is_some();
    if matches!(command, Some("run" | "chat" | "heartbeat")) {
        init_logs(&config, log_file);
        if let (true, Some(path)) = (logs_in_file, &log_path) {
            println!("(logs go to {})", path.display());
        }
        tracing::info!(config = ?config, "configuration");
    }
    match command {
        Some("doctor") => doctor::run(&config).await,
        Some("mcp") => {
            // stdout is the protocol's on stdio: logs go to stderr.
            init_logs(&config, None);
            // `--http` alone serves on loopback's 127.0.0.1:8808; a bare port stays on loopback too.
            let http = args.iter().position(|a| a == "--http").map(|i| match args.get(i + 1).filter(|a| !a.starts_with("--")) {
                Some(addr) if addr.parse::<u16>().is_ok() => format!("127.0.0.1:{addr}"),
                Some(addr) => addr.clone(),
                None => mcp::DEFAULT_HTTP_ADDR.to_string(),
            });
            let http = http.as_deref();
            mcp::run(&config, http).await
        }
        Some("status") => status::run(&config).await,
        Some("import") => import::run(&config, &args[1..]).await,
        Some("reindex") => reindex::run(&config, &args[1..]).await,
        Some("why") => status::why(&config, args.get(1).map(String::as_str)).await,
        Some("rules") => status::rules(&config, args.get(1).map(String::as_str)).await,
        Some("proposals") => alignment::proposals(&config).await,
        Some("export") => forgetme::export(&config, &args[1..]).await,
        Some("approve") => alignment::decide(&config, true, args.get(1).map(String::as_str), None).await,
        Some("reject") => {
            let why = (args.len() > 2).then(|| args[2..].join(" "));
            alignment::decide(&config, false, args.get(1).map(String::as_str), why.as_deref()).await
        }
        Some("run") | Some("chat") => {
            let terminal = on_terminal.then(|| Arc::new(Terminal::new(&config.terminal_user, json, command == Some("chat"))));
            let channel: Arc<dyn Channel> = match &terminal {
                Some(t) => t.clone(),
                None => Arc::new(Discord::new(config.discord.clone())),
            };
            let mind = Arc::new(Mind::new(config, channel));
            if let (Some(t), true) = (terminal, logs_in_file) {
                tokio::spawn(show_model_status(mind.clone(), t));
            }
            runtime::on_signals(&mind);
            runtime::run(mind, None).await;
            // tokio's stdin reader is a blocking thread that would hold the runtime open.
            std::process::exit(0)
        }
        Some("heartbeat") => {
            if !args.iter().any(|a| a == "--once") {
                eprintln!("dionysus: heartbeat runs with --once (the scheduled ones run under `dionysus run`)");
                return ExitCode::from(2);
            }
            let channel: Arc<dyn Channel> = if config.discord.token.is_some() {
                Arc::new(Discord::new(config.discord.clone()))
            } else {
                Arc::new(Terminal::new(&config.terminal_user, false, true))
            };
            let mind = Mind::new(config, channel);
            match heartbeat::run_once(&mind).await {
                Ok(r) => {
                    println!(
                        "heartbeat #{} ({} decision): actions {:?}, {} rejected, {} work items settled\n{}",
                        r.number, r.decided_by, r.actions, r.rejected, r.work_settled, r.narrative
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("dionysus heartbeat: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("dionysus: unknown command '{other}'\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

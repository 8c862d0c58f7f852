//! `dionysus`: the thin driver beside PostgreSQL.
use dionysus_driver::channel::{discord::Discord, terminal::Terminal, Channel};
use dionysus_driver::config::{Config, LogFormat};
use dionysus_driver::{doctor, heartbeat, runtime, status, Mind};
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "usage: dionysus [--config FILE] <command>

commands:
  run               everything: the conversation (Discord when a token is configured, else the
                    terminal), heartbeats, queued work and the outbox
  chat [--json]     the same, with the terminal as the channel (--json: JSON lines in and out)
  heartbeat --once  run one heartbeat now and print what it did
  status            energy, goals, last heartbeats, queue, outbox, memory health
  doctor            check PostgreSQL, pgvector, the extension, the worker, the embedding model,
                    the LLM endpoints and the Discord token

configuration: environment variables and an optional TOML file (--config or DIONYSUS_CONFIG);
every key is in the README. The essentials:
  DIONYSUS_DATABASE_URL   (default postgresql://postgres@127.0.0.1:5433/dionysus)
  DIONYSUS_LLM_BASE_URL   (default http://127.0.0.1:11434/v1, a local Ollama)
  DIONYSUS_FAST_MODEL / DIONYSUS_SMART_MODEL, DIONYSUS_LLM_API_KEY
  DIONYSUS_DISCORD_TOKEN, DIONYSUS_DISCORD_ALLOWED_USERS, DIONYSUS_DISCORD_HOME_CHANNEL";

fn init_logs(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DIONYSUS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,serenity=warn,tokio_postgres=warn,reqwest=warn,hyper=warn,rustls=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
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
    if matches!(command, Some("run" | "chat" | "heartbeat")) {
        init_logs(&config);
        tracing::info!(config = ?config, "configuration");
    }
    match command {
        Some("doctor") => doctor::run(&config).await,
        Some("status") => status::run(&config).await,
        Some("run") | Some("chat") => {
            let terminal = command == Some("chat") || config.discord.token.is_none();
            let channel: Arc<dyn Channel> = if terminal {
                Arc::new(Terminal::new(&config.terminal_user, args.iter().any(|a| a == "--json"), command == Some("chat")))
            } else {
                Arc::new(Discord::new(config.discord.clone()))
            };
            let mind = Arc::new(Mind::new(config, channel));
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

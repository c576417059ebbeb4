//! The `txmgr` command: run the daemon, apply migrations, check configuration.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use txmgr::{config::Config, daemon};

mod cli;

/// jemalloc instead of glibc malloc: the engine allocates and frees many
/// small buffers per intent (JSON, RPC, SQL), which glibc made costly, and
/// jemalloc returns a burst's freed pages to the OS (mimalloc kept them).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// txmgr — durable, fenced EVM transaction submission for many signers.
#[derive(Debug, Parser)]
#[command(version = txmgr::build_info::LONG_VERSION, about)]
struct Cli {
    /// Configuration file (environment variables `TXMGR_<SECTION>__<KEY>` override it).
    #[arg(
        long,
        short,
        global = true,
        env = "TXMGR_CONFIG",
        default_value = "config.toml"
    )]
    config: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon (applies migrations first unless told not to).
    Run {
        /// Do not apply migrations at start (overrides `database.migrate_on_start`).
        #[arg(long)]
        no_migrate: bool,
    },
    /// Apply database migrations and exit (one node at a time: others wait
    /// on the migration lock, then find nothing to do).
    Migrate {
        /// List the pending migrations and what each does to nodes of the
        /// previous release still running; apply nothing.
        #[arg(long)]
        plan: bool,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// API token tools.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Database tools.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// Print the OpenAPI document of the HTTP API (as `GET /v1/openapi.json` serves it).
    Openapi,
    #[command(flatten)]
    Remote(Box<cli::RemoteCommand>),
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Print every table's rows and bytes, its largest index, and history
    /// retention's progress.
    Stats,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Print a fresh random bearer token and the `[[auth.tokens]]` entry
    /// (with its SHA-256) to paste into config.toml. Only the hash goes into
    /// the file; hand the token to its user and keep no other copy.
    New {
        /// Name of the token (shown in logs and the audit table).
        #[arg(long, default_value = "client")]
        name: String,
        /// Role: `client` (create and read transactions) or `ops` (also /v1/ops).
        #[arg(long, default_value = "client", value_parser = ["client", "ops"])]
        role: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the configuration and print the effective values (secrets redacted).
    Check,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The client commands and the tools below need no configuration file.
    let command = match cli.command {
        Command::Remote(remote) => return remote.run(),
        Command::Openapi => {
            return match txmgr::http::openapi::document().to_pretty_json() {
                Ok(json) => {
                    println!("{json}");
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("txmgr: cannot write the OpenAPI document: {err}");
                    ExitCode::FAILURE
                }
            };
        }
        command => command,
    };
    let cli = Cli {
        config: cli.config,
        command,
    };
    if let Command::Token {
        command: TokenCommand::New { name, role },
    } = &cli.command
    {
        let token = txmgr::http::auth::new_token();
        println!("# token (give it to its user; it is not stored anywhere):");
        println!("{token}");
        println!();
        print!(
            "{}",
            txmgr::http::auth::token_entry_toml(name, role, &token)
        );
        return ExitCode::SUCCESS;
    }
    let config = match Config::load(&cli.config) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("invalid configuration {}:\n{err}", cli.config.display());
            return ExitCode::from(2);
        }
    };
    if let Command::Config {
        command: ConfigCommand::Check,
    } = cli.command
    {
        for warning in config.warnings() {
            eprintln!("warning: {warning}");
        }
        print!("{}", config.redacted_toml());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let tracing_guard = daemon::init_tracing(&config.log, &config.telemetry, &config.node_id);
    config.log_warnings();
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run { no_migrate } => daemon::run(config, cli.config, !no_migrate).await,
            Command::Migrate { plan: false } => daemon::migrate_only(&config).await,
            Command::Migrate { plan: true } => daemon::migration_plan(&config).await,
            Command::Db {
                command: DbCommand::Stats,
            } => daemon::print_db_stats(&config).await,
            Command::Config { .. }
            | Command::Token { .. }
            | Command::Openapi
            | Command::Remote(_) => Ok(()),
        }
    });
    // The runtime is idle now; the exporter's flush blocks on its thread.
    drop(runtime);
    tracing_guard.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %format!("{err:#}"), "txmgr stopped with an error");
            eprintln!("txmgr: {err:#}");
            ExitCode::FAILURE
        }
    }
}

//! The `txmgr` command: run the daemon, apply migrations, check configuration.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use txmgr::{config::Config, daemon};

/// txmgr — durable, fenced EVM transaction submission for many signers.
#[derive(Debug, Parser)]
#[command(version, about)]
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
    /// Apply database migrations and exit.
    Migrate,
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Validate the configuration and print the effective values (secrets redacted).
    Check,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    daemon::init_tracing(&config.log);
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run { no_migrate } => daemon::run(config, cli.config, !no_migrate).await,
            Command::Migrate => daemon::migrate_only(&config).await,
            Command::Config { .. } => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %format!("{err:#}"), "txmgr stopped with an error");
            eprintln!("txmgr: {err:#}");
            ExitCode::FAILURE
        }
    }
}

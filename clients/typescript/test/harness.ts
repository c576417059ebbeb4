/**
 * What the daemon tests run against: a real anvil, a fresh PostgreSQL
 * database and a real `txmgr run` process, all started here and torn down
 * after the file's tests. No part of the API is mocked.
 *
 * Environment (all required; a missing one fails the run, it never skips):
 * - `TXMGR_BIN`: the daemon binary;
 * - `ANVIL_BIN`: anvil;
 * - `DATABASE_URL`: an admin URL of the PostgreSQL server
 *   (`postgres://postgres@127.0.0.1:5432/postgres`); a database is created
 *   per daemon and dropped at the end (`psql` must be on the PATH).
 *
 * ```text
 * Fixture.start ─► TestDb.create (CREATE DATABASE)   Anvil.start (free port, chain 31337)
 *               └► Daemon.start: config file + dev keys in its environment ─► /readyz 200
 * fixture.close ─► SIGTERM daemon, SIGKILL anvil, DROP DATABASE … WITH (FORCE)
 * ```
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** anvil's first dev accounts: [private key, address]. */
export const DEV_KEYS: readonly (readonly [string, string])[] = [
    ["0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"],
    ["0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"],
    ["0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"],
];

/** Where the tests' transfers go (no account of ours). */
export const SINK = "0x000000000000000000000000000000000000dead";

/** Every process started here, killed if the test process exits early. */
const children = new Set<ChildProcess>();
process.on("exit", () => {
    for (const child of children) child.kill("SIGKILL");
});
for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => process.exit(130));
}

/** The value of a required environment variable; throws (fails the test) when unset. */
export function requiredEnv(name: string): string {
    const value = process.env[name];
    if (value === undefined || value === "") throw new Error(`${name} is not set (see clients/typescript/test.sh)`);
    return value;
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const server = createServer();
        server.unref();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () => {
            const address = server.address();
            server.close(() => {
                if (address !== null && typeof address === "object") resolve(address.port);
                else reject(new Error("no port"));
            });
        });
    });
}

/** Resolves after `ms`. */
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` every `everyMs` until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function eventually<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 100): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
        try {
            const value = await probe();
            if (value !== undefined) return value;
        } catch (error) {
            last = error;
        }
        if (Date.now() > deadline) {
            throw new Error(`${what}: not within ${timeoutMs} ms${last === undefined ? "" : ` (last error: ${String(last)})`}`);
        }
        await delay(everyMs);
    }
}

/** One JSON-RPC call. */
export async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
    const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
    const answer = (await response.json()) as { result?: unknown; error?: { message: string } };
    if (answer.error !== undefined) throw new Error(`${method}: ${answer.error.message}`);
    return answer.result;
}

/** An anvil on a free loopback port, chain 31337. */
export class Anvil {
    private constructor(
        readonly url: string,
        private readonly child: ChildProcess,
    ) {}

    /** Starts anvil mining a block every `blockTime` seconds (automine when absent). */
    static async start(blockTime?: number): Promise<Anvil> {
        const bin = requiredEnv("ANVIL_BIN");
        for (let attempt = 1; ; attempt++) {
            const port = await freePort();
            const args = ["--host", "127.0.0.1", "--port", String(port), "--chain-id", "31337", "--silent"];
            if (blockTime !== undefined) args.push("--block-time", String(blockTime));
            const child = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
            children.add(child);
            let stderr = "";
            child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
            const url = `http://127.0.0.1:${port}`;
            try {
                await eventually("anvil answers eth_chainId", 15_000, async () => {
                    if (child.exitCode !== null || child.signalCode !== null) {
                        throw new Error(`anvil exited: ${stderr}`);
                    }
                    return (await rpc(url, "eth_chainId")) === "0x7a69" ? true : undefined;
                });
                return new Anvil(url, child);
            } catch (error) {
                child.kill("SIGKILL");
                children.delete(child);
                if (attempt >= 3) throw error;
            }
        }
    }

    /** A JSON-RPC call to this anvil. */
    rpc(method: string, params: unknown[] = []): Promise<unknown> {
        return rpc(this.url, method, params);
    }

    /** The account's nonce at the latest block. */
    async nonce(address: string): Promise<number> {
        return Number(await this.rpc("eth_getTransactionCount", [address, "latest"]));
    }

    /** Kills it. */
    stop(): void {
        this.child.kill("SIGKILL");
        children.delete(this.child);
    }
}

/** A database of its own on the server of `DATABASE_URL`, dropped by {@link TestDb.drop}. */
export class TestDb {
    private constructor(
        readonly name: string,
        readonly url: string,
    ) {}

    /** `CREATE DATABASE txmgr_ts_<random>`. */
    static async create(): Promise<TestDb> {
        const admin = requiredEnv("DATABASE_URL");
        const name = `txmgr_ts_${randomBytes(6).toString("hex")}`;
        await psql(admin, `CREATE DATABASE ${name}`);
        const url = new URL(admin);
        url.pathname = `/${name}`;
        return new TestDb(name, url.href);
    }

    /** `DROP DATABASE … WITH (FORCE)`. */
    async drop(): Promise<void> {
        await psql(requiredEnv("DATABASE_URL"), `DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`);
    }

    /** One statement's rows, `|`-separated, in this database. */
    async query(sql: string): Promise<string[]> {
        return (await psql(this.url, sql)).split("\n").filter((line) => line !== "");
    }
}

async function psql(url: string, sql: string): Promise<string> {
    const { stdout } = await run("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAtX", "-c", sql]);
    return stdout;
}

/** An API token of the daemon: `[[auth.tokens]]` gets its SHA-256, the client the token. */
export interface Token {
    name: string;
    token: string;
    /** TOML of extra keys of the entry, e.g. `rate = { creates_per_second = 1, burst = 1 }`. */
    extra?: string;
}

/** A fresh client token. */
export function newToken(name: string, extra?: string): Token {
    return { name, token: randomBytes(32).toString("hex"), extra };
}

/** What a daemon runs with, besides its database, chain and port. */
export interface DaemonSpec {
    /** A name for its node id and files. */
    name: string;
    /** Indices into {@link DEV_KEYS} of its submitters (default: the first). */
    submitters?: number[];
    /** Its API tokens (at least one: with tokens the `Host` check is off, so a proxy may stand in front). */
    tokens: Token[];
    /** TOML appended to the file (`[[webhooks]]` tables …). */
    extra?: string;
    /** Extra environment (a webhook's `secret_env`). */
    env?: Record<string, string>;
}

/** One `txmgr run` process with a fixed node id, port and configuration file. */
export class Daemon {
    readonly base: string;
    private child: ChildProcess | undefined;
    private readonly dir: string;
    private readonly log: string;

    private constructor(
        readonly port: number,
        private readonly spec: DaemonSpec,
        private readonly config: string,
    ) {
        this.base = `http://127.0.0.1:${port}`;
        this.dir = mkdtempSync(join(tmpdir(), `txmgr-ts-${spec.name}-`));
        this.log = join(this.dir, "daemon.log");
    }

    /** Writes the configuration, starts the process and waits until `/readyz` answers 200. */
    static async start(spec: DaemonSpec, db: TestDb, anvil: Anvil): Promise<Daemon> {
        const port = await freePort();
        const daemon = new Daemon(port, spec, configText(spec, db, anvil, port));
        writeFileSync(daemon.configPath, daemon.config);
        daemon.spawn();
        await daemon.ready();
        return daemon;
    }

    private get configPath(): string {
        return join(this.dir, "txmgr.toml");
    }

    /** Starts the process again with the same node id, port and file (after {@link kill}); does not wait. */
    spawn(): void {
        if (this.child !== undefined) throw new Error("the daemon runs already");
        const bin = requiredEnv("TXMGR_BIN");
        const env: Record<string, string> = { ...stringEnv(), RUST_LOG: "info", ...this.spec.env };
        for (const [i, [key]] of DEV_KEYS.entries()) env[`TS_DEV_KEY_${i}`] = key;
        const fd = openSync(this.log, "a");
        try {
            this.child = spawn(bin, ["run", "--config", this.configPath], { env, stdio: ["ignore", "ignore", fd] });
        } finally {
            closeSync(fd);
        }
        children.add(this.child);
    }

    /** Waits until `/readyz` answers 200 (60 s at most; the log is in the error otherwise). */
    async ready(): Promise<void> {
        const child = this.child;
        try {
            await eventually("txmgr /readyz", 60_000, async () => {
                if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
                    throw new Error(`txmgr exited (${child?.exitCode ?? child?.signalCode})`);
                }
                const response = await fetch(`${this.base}/readyz`);
                await response.arrayBuffer();
                return response.ok ? true : undefined;
            });
        } catch (error) {
            throw new Error(`${String(error)}\n---- daemon log ----\n${this.logTail()}`);
        }
    }

    /** SIGKILL, and waits until the process is gone: a crash, nothing released. */
    async kill(): Promise<void> {
        await this.signalAndWait("SIGKILL", 10_000);
    }

    /** SIGTERM, and waits for the exit (SIGKILL after 15 s). */
    async stop(): Promise<void> {
        const child = this.child;
        if (child === undefined) return;
        if (!(await this.signalAndWait("SIGTERM", 15_000))) await this.kill();
    }

    private async signalAndWait(signal: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
        const child = this.child;
        if (child === undefined) return true;
        const exited = new Promise<boolean>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) resolve(true);
            else child.once("exit", () => resolve(true));
        });
        child.kill(signal);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
        const done = await Promise.race([exited, timeout]);
        clearTimeout(timer);
        if (done) {
            children.delete(child);
            this.child = undefined;
        }
        return done;
    }

    /** The last lines of the daemon's log. */
    logTail(lines = 60): string {
        if (!existsSync(this.log)) return "(no log)";
        return readFileSync(this.log, "utf8").split("\n").slice(-lines).join("\n");
    }

    /** Removes its files (the process must be stopped). */
    cleanUp(): void {
        rmSync(this.dir, { recursive: true, force: true });
    }
}

function stringEnv(): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) {
        // The daemon reads TXMGR_<SECTION>__<KEY> as configuration: pass none of the caller's.
        if (value !== undefined && !(key.startsWith("TXMGR_") && key.includes("__"))) env[key] = value;
    }
    return env;
}

function configText(spec: DaemonSpec, db: TestDb, anvil: Anvil, port: number): string {
    const submitters = (spec.submitters ?? [0])
        .map((i) => `[submitters."${DEV_KEYS[i]?.[1]}"]\nsigner = { kind = "env", env = "TS_DEV_KEY_${i}" }\n`)
        .join("");
    const tokens = spec.tokens
        .map((t) => {
            const sha256 = createHash("sha256").update(t.token).digest("hex");
            return `[[auth.tokens]]\nname = "${t.name}"\nrole = "client"\nsha256 = "${sha256}"\n${t.extra ?? ""}\n`;
        })
        .join("");
    return `node_id = "ts-${spec.name}"
[database]
url = "${db.url}"
max_connections = 6
[http]
listen = "127.0.0.1:${port}"
[chain]
rpc_url = "${anvil.url}"
chain_id = 31337
poll_interval = "200ms"
rpc_timeout = "2s"
sweep_interval = "1s"
[lease]
duration = "3s"
renew_interval = "1s"
clock_skew_allowance = "500ms"
[node]
heartbeat_interval = "300ms"
discovery_interval = "500ms"
[defaults]
finality = { confirmations = 1 }
resubmit_interval = "2s"
[log]
level = "info"
${submitters}${tokens}${spec.extra ?? ""}`;
}

/** A database, an anvil and a daemon on them. */
export class Fixture {
    private constructor(
        readonly db: TestDb,
        readonly anvil: Anvil,
        readonly daemon: Daemon,
    ) {}

    /** Starts all three; anvil mines every `blockTime` seconds. */
    static async start(spec: DaemonSpec, blockTime = 0.25): Promise<Fixture> {
        const [db, anvil] = await Promise.all([TestDb.create(), Anvil.start(blockTime)]);
        try {
            const daemon = await Daemon.start(spec, db, anvil);
            return new Fixture(db, anvil, daemon);
        } catch (error) {
            anvil.stop();
            await db.drop();
            throw error;
        }
    }

    /** Stops the daemon and anvil, drops the database. */
    async close(): Promise<void> {
        await this.daemon.stop();
        this.daemon.cleanUp();
        this.anvil.stop();
        await this.db.drop();
    }

    /**
     * Wraps a test body: on failure the daemon's log tail is printed with the
     * error, since the daemon's side is usually where the answer is.
     */
    logged(body: () => Promise<void>): () => Promise<void> {
        return async () => {
            try {
                await body();
            } catch (error) {
                process.stderr.write(`---- daemon log (last lines) ----\n${this.daemon.logTail()}\n`);
                throw error;
            }
        };
    }
}

/** One HTTP exchange a {@link recordingFetch} saw. */
export interface Exchange {
    method: string;
    /** Path and query. */
    path: string;
    /** The answer's status; undefined when no answer came. */
    status: number | undefined;
    /** When the request was sent (ms since the epoch). */
    at: number;
    /** The request body, as sent. */
    body: string | undefined;
    /** The answer's Retry-After header. */
    retryAfter: string | null;
}

/** A `fetch` that records every exchange in `log`, then behaves as the global one. */
export function recordingFetch(log: Exchange[]): typeof fetch {
    return async (input, init) => {
        const url = new URL(String(input instanceof Request ? input.url : input));
        const exchange: Exchange = {
            method: init?.method ?? "GET",
            path: url.pathname + url.search,
            status: undefined,
            at: Date.now(),
            body: typeof init?.body === "string" ? init.body : undefined,
            retryAfter: null,
        };
        log.push(exchange);
        const response = await fetch(input, init);
        exchange.status = response.status;
        exchange.retryAfter = response.headers.get("retry-after");
        return response;
    };
}

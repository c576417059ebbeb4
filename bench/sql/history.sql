-- txmgr-bench: a history of finished intents, loaded in bulk (no API).
--
-- Loads N final intents (CONFIRMED, FAILED_FINAL, CANCELLED, REJECTED) of
-- SUBMITTERS submitters on CHAINS chains (ids 900001 .. 900000 + CHAINS,
-- never the benchmark's live chains), created over the last DAYS days, into
-- a migrated database: `managed_tx`, `tx_attempt`, `tx_completion` (the
-- feed), `ops_audit` and one `submitter_nonce_cursor` row per (chain,
-- submitter). The rows have the shapes the engine's own writes leave on a
-- finished intent (store::intents, group::allocate, group::writes,
-- resubmit_claims, tracking, completions, actions, audit):
--
--   * state mix: ~95 % CONFIRMED, ~2 % FAILED_FINAL (receipt status 0x0),
--     ~1.2 % CANCELLED by a mined cancel (2 attempts), 0.5 % CANCELLED by an
--     operator while QUEUED (no nonce), 2 % REJECTED (no nonce: half
--     `expired`, half refused by the node with one attempt);
--   * ~10 % of the confirmed/failed intents were fee-bumped (2 attempts);
--   * 70 % ETH transfers (receipt without logs), 30 % ERC-20 `transfer`
--     calls (receipt with one Transfer log);
--   * tx_id a UUIDv7 whose timestamp is created_at; ingress_seq and the
--     feed's seq in time order; nonces 0, 1, 2, ... per (chain, submitter),
--     in time order, without gaps;
--   * about 4 `ops_audit` rows per 100 intents (tx_cancel, tx_speedup,
--     tx_rebroadcast, pause, resume, restart, unprotect, reload, top_up);
--   * created_at from DAYS days ago to an hour ago, evenly; each intent
--     final within seconds to a minute.
-- No `spend_ledger` rows: a node registers its spend horizon at start and
-- the ledger's pruner deletes every row older than the longest window
-- (60 s when no submitter has a spend limit), so a history there would be
-- deleted by the benchmark's own nodes while it measures.
--
-- Parameters: psql-style tokens that the caller replaces textually by
-- integers before sending the script; each is used once, in the DECLARE
-- block below (these mentions are replaced too, harmlessly):
--   :N  :SUBMITTERS  :CHAINS  :DAYS
--
-- One statement (a DO block): one transaction whether it is sent with
-- sqlx's raw_sql or run with `psql -f`. It refuses to run twice on the same
-- chains. Afterwards send bench/sql/history-vacuum.sql as a statement of
-- its own (VACUUM cannot run in a transaction or a multi-statement string).
--
-- Speed: the rows are inserted with the CHECK constraints on (their regular
-- expressions are a third of the CPU), the foreign keys and the secondary
-- and unique indexes dropped and put back afterwards from their catalog
-- definitions (`rebuild` below; the schema ends identical, and every
-- foreign key and unique index is checked as it is put back). That takes
-- ACCESS EXCLUSIVE locks: load before any txmgr node connects. With
-- `rebuild := false` the rows go through every index as the engine's own
-- writes do (slower, more WAL, and indexes 25-70 % larger: pages split the
-- way live inserts split them, where a rebuilt index is packed to 90 %).
DO $history$
DECLARE
    n          bigint := :N;          -- final intents to load
    submitters bigint := :SUBMITTERS; -- submitters per chain
    chains     bigint := :CHAINS;     -- chains 900001 .. 900000 + chains
    days       bigint := :DAYS;       -- history spread over this many days
    chunk      constant bigint := 100000; -- intents per statement
    first_chain constant bigint := 900001;
    kk         bigint;                -- (chain, submitter) keys
    t0         timestamptz;           -- creation of the first intent
    step       double precision;      -- seconds between two creations
    lo         bigint;
    hi         bigint;
    loaded     bigint;
    rebuild    constant boolean := true; -- see "Speed" above
    ddl        text[] := '{}';        -- statements that put back what was dropped
    r          record;
    loaded_ddl text;
BEGIN
    IF n < 1 OR submitters < 1 OR chains < 1 OR days < 1 THEN
        RAISE EXCEPTION 'history: N, SUBMITTERS, CHAINS and DAYS must be positive (got %, %, %, %)',
            n, submitters, chains, days;
    END IF;
    IF EXISTS (SELECT 1 FROM submitter_nonce_cursor
                WHERE chain_id BETWEEN first_chain AND first_chain + chains - 1)
       OR EXISTS (SELECT 1 FROM managed_tx
                   WHERE chain_id BETWEEN first_chain AND first_chain + chains - 1) THEN
        RAISE EXCEPTION 'history: chains % .. % already have rows; load into a fresh database',
            first_chain, first_chain + chains - 1;
    END IF;
    -- This transaction only. A crash during the load loses the load, which
    -- is then simply run again.
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM set_config('work_mem', '256MB', true);

    kk := submitters * chains;
    t0 := now() - make_interval(days => days::int);
    -- The last intent is created an hour before now (all are final by then).
    step := (days * 86400.0 - 3600.0) / n;

    IF rebuild THEN
        -- Foreign keys and unique constraints of the loaded tables, and
        -- their indexes that back no constraint: dropped now, put back
        -- after the load exactly as they were defined.
        FOR r IN
            SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname,
                          pg_get_constraintdef(c.oid)) AS redo,
                   format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname) AS undo
              FROM pg_constraint c
             WHERE c.conrelid IN ('managed_tx'::regclass, 'tx_attempt'::regclass,
                                  'tx_completion'::regclass, 'ops_audit'::regclass)
               AND c.contype IN ('f', 'u', 'x')
             ORDER BY c.contype DESC  -- unique before foreign (nothing references these)
        LOOP
            EXECUTE r.undo;
            ddl := r.redo || ddl;
        END LOOP;
        FOR r IN
            SELECT pg_get_indexdef(x.indexrelid) AS redo,
                   format('DROP INDEX %s', x.indexrelid::regclass) AS undo
              FROM pg_index x
             WHERE x.indrelid IN ('managed_tx'::regclass, 'tx_attempt'::regclass,
                                  'tx_completion'::regclass, 'ops_audit'::regclass)
               AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
        LOOP
            EXECUTE r.undo;
            ddl := r.redo || ddl;
        END LOOP;
    END IF;

    lo := 0;
    WHILE lo < n LOOP
        hi := least(lo + chunk, n) - 1;
        WITH
        -- Per intent: its key, its place in its key's sequence (j), and 32
        -- random-looking bytes (h) every other choice is drawn from.
        b0 AS (
            SELECT i, i % kk AS k, i / kk AS j, sha256(int8send(i) || '\x6869'::bytea) AS h
              FROM generate_series(lo, hi) AS i OFFSET 0 -- computed once per row, not inlined
        ),
        b1 AS (
            SELECT b0.*,
                   (k % chains) AS ci, (k / chains) AS si,
                   -- Without a nonce (periodic in j, so nonces stay dense):
                   -- j % 50 = 17 REJECTED, j % 200 = 101 CANCELLED while QUEUED.
                   CASE WHEN j % 50 = 17 THEN
                            CASE WHEN get_byte(h, 5) < 128 THEN 'rejected_expired' ELSE 'rejected_refused' END
                        WHEN j % 200 = 101 THEN 'cancelled_queued'
                        WHEN get_byte(h, 0) < 5 THEN 'failed'
                        WHEN get_byte(h, 0) < 8 THEN 'cancelled_mined'
                        ELSE 'confirmed' END AS kind,
                   -- Nonces handed out before j in this key (the nonce of a
                   -- nonce holder; for a refused rejection, the nonce it held
                   -- and gave back, which the key's next intent took).
                   j - (j + 32) / 50 - (j + 98) / 200 AS nonce_at,
                   get_byte(h, 1) < 26 AS bump_drawn,
                   get_byte(h, 2) < 77 AS erc20,
                   get_byte(h, 2) >= 243 AS caller_fees,
                   get_byte(h, 3) < 128 AS caller_gas,
                   get_byte(h, 4) < 3 AS private,
                   get_byte(h, 4) >= 248 AS deadline,
                   get_byte(h, 12) >= 26 AS has_request_id,
                   t0 + ((i + get_byte(h, 13) / 256.0) * step) * interval '1 second' AS created_at,
                   -- base fee and priority fee, wei
                   (get_byte(h, 16) + 4)::bigint * 250000000 AS base_fee,
                   1000000000 + get_byte(h, 17)::bigint * 10000000 AS prio_fee,
                   1 + (i * 8) / n + (i % kk) % 3 AS token,
                   get_byte(h, 18) AS r18, get_byte(h, 19) AS r19,
                   get_byte(h, 14) AS r14, get_byte(h, 15) AS r15,
                   get_byte(h, 6) * 256 + get_byte(h, 7) AS r67,
                   get_byte(h, 8)::bigint * 65536 + get_byte(h, 9) * 256 + get_byte(h, 10) AS r810,
                   get_byte(h, 11) AS r11
              FROM b0 OFFSET 0 -- computed once per row, not inlined
        ),
        b2 AS (
            SELECT b1.*,
                   first_chain + ci AS chain_id,
                   '0x' || md5('txmgr-history-submitter-' || si)
                        || left(md5('txmgr-history-submitter-b-' || si), 8) AS submitter,
                   kind IN ('confirmed', 'failed', 'cancelled_mined') AS has_nonce,
                   kind IN ('confirmed', 'failed') AND bump_drawn AS bumped,
                   -- recipient: one of 5,000; token: one of 20
                   left(encode(sha256(int8send(r67 % 5000) || '\x7270'::bytea), 'hex'), 40) AS rcpt40,
                   '0x' || left(encode(sha256(int8send(r11 % 20) || '\x746f6b'::bytea), 'hex'), 40) AS token_addr,
                   (r810 + 1) * 100000000000 AS value_wei,       -- ETH: up to ~1.7 ETH
                   (r810 + 1) * 500000000000 AS token_amount,
                   '0x' || encode(sha256(h || '\x01'::bytea), 'hex') AS h1,
                   '0x' || encode(sha256(h || '\x02'::bytea), 'hex') AS h2,
                   CASE WHEN caller_fees THEN 50000000000 ELSE 2 * base_fee + prio_fee END AS max_fee1,
                   CASE WHEN caller_fees THEN 2000000000 ELSE prio_fee END AS prio1
              FROM b1 OFFSET 0 -- computed once per row, not inlined
        ),
        -- Times: allocation, broadcasts, the mined block, the final write.
        b3 AS (
            SELECT b2.*,
                   created_at + (0.010 + r14 / 1000.0) * interval '1 second' AS alloc_at,
                   created_at + (0.020 + r14 / 1000.0 + r15 / 5000.0) * interval '1 second' AS bcast1_at,
                   -- a bump or cancel 30-60 s after the first broadcast
                   created_at + (30.0 + r18 / 8.5) * interval '1 second' AS bcast2_at,
                   CASE WHEN erc20 THEN 34000 + r19 * 67 ELSE 21000 END AS gas_used_ok,
                   CASE WHEN caller_gas THEN CASE WHEN erc20 THEN 65000 ELSE 21000 END
                        WHEN erc20 THEN ((34000 + r19 * 67) * 6) / 5 ELSE 21000 END AS gas_limit1
              FROM b2 OFFSET 0 -- computed once per row, not inlined
        ),
        b4 AS (
            SELECT b3.*,
                   CASE WHEN bumped OR kind = 'cancelled_mined' THEN bcast2_at ELSE bcast1_at END
                       + (1.0 + r19 / 50.0) * interval '1 second' AS mined_at,
                   -- chrono's RFC 3339, as serde writes Intent::valid_until
                   CASE WHEN deadline OR kind = 'rejected_expired' THEN
                       to_char((created_at + CASE WHEN kind = 'rejected_expired' THEN interval '30 seconds'
                                                  ELSE interval '1 hour' END) AT TIME ZONE 'UTC',
                               'YYYY-MM-DD"T"HH24:MI:SS"Z"') END AS valid_until
              FROM b3 OFFSET 0 -- computed once per row, not inlined
        ),
        g AS MATERIALIZED (
            SELECT b4.*,
                   -- UUIDv7: 48-bit ms timestamp, version 7, variant 10, random rest
                   (lpad(to_hex(floor(extract(epoch FROM created_at) * 1000)::bigint), 12, '0')
                    || '7' || substr(encode(substring(h FROM 21 FOR 10), 'hex'), 1, 3)
                    || substr('89ab', (get_byte(h, 31) & 3) + 1, 1)
                    || substr(encode(substring(h FROM 21 FOR 10), 'hex'), 4, 15))::uuid AS tx_id,
                   CASE WHEN has_request_id THEN encode(substring(h FROM 17 FOR 16), 'hex')::uuid::text
                   END AS request_id,
                   CASE kind WHEN 'confirmed' THEN 'CONFIRMED' WHEN 'failed' THEN 'FAILED_FINAL'
                             WHEN 'cancelled_mined' THEN 'CANCELLED' WHEN 'cancelled_queued' THEN 'CANCELLED'
                             ELSE 'REJECTED' END AS state,
                   floor(extract(epoch FROM mined_at) / 2)::bigint - 880000000 AS block_number,
                   '0x' || encode(sha256(int8send(chain_id * 10000000000
                                                  + floor(extract(epoch FROM mined_at) / 2)::bigint - 880000000)),
                                  'hex') AS block_hash,
                   CASE kind
                       WHEN 'rejected_expired' THEN created_at + (30.0 + r18 / 100.0) * interval '1 second'
                       WHEN 'rejected_refused' THEN alloc_at + (0.050 + r18 / 1000.0) * interval '1 second'
                       WHEN 'cancelled_queued' THEN created_at + (1.0 + r18 * 1.2) * interval '1 second'
                       ELSE mined_at + (20.0 + r15 / 12.0) * interval '1 second'
                   END AS done_at,
                   CASE WHEN kind IN ('cancelled_mined') OR bumped THEN h2 ELSE h1 END AS last_hash,
                   CASE kind
                       WHEN 'rejected_expired' THEN 'expired'
                       WHEN 'cancelled_queued' THEN 'cancelled_by_operator'
                   END AS sub_state,
                   CASE kind
                       WHEN 'rejected_refused' THEN
                           CASE WHEN r15 < 128 THEN 'insufficient funds for gas * price + value: have 0 want '
                                                    || (gas_limit1 * max_fee1)::text
                                ELSE 'max fee per gas less than block base fee: address ' || submitter
                                     || ', maxFeePerGas: ' || max_fee1 || ', baseFee: ' || (max_fee1 + 1) END
                       WHEN 'cancelled_queued' THEN 'cancelled on request (the ops audit says who and why)'
                       WHEN 'rejected_expired' THEN 'expired: valid_until ' || valid_until
                                                    || ' passed before a nonce was drawn'
                   END AS last_error
              FROM b4
        ),
        ins_intents AS (
            INSERT INTO managed_tx (tx_id, chain_id, submitter, request_id, request_hash, intent,
                                    nonce, state, sub_state, tx_hash, mined_tx_hash, receipt,
                                    receipt_block_number, receipt_block_hash, submit_attempts,
                                    last_submit_at, next_resubmit_at, last_error, fencing_token,
                                    created_at, updated_at, confirmed_at, resubmits,
                                    first_broadcast_at, requested_action, requested_by, retry_at,
                                    allocated_at, maybe_pooled, trace_context, accepted_hash)
            SELECT tx_id, chain_id, submitter, request_id,
                sha256(h || '\x03'::bytea),
                -- serde's Intent: to, value, data, gas_limit, fees; private and
                -- valid_until only when set
                ('{"to":"' || CASE WHEN erc20 THEN token_addr ELSE '0x' || rcpt40 END
                 || '","value":"0x' || CASE WHEN erc20 THEN '0' ELSE to_hex(value_wei) END
                 || '","data":"0x' || CASE WHEN erc20 THEN 'a9059cbb' || lpad(rcpt40, 64, '0')
                                                            || lpad(to_hex(token_amount), 64, '0')
                                           ELSE '' END
                 || '","gas_limit":' || CASE WHEN caller_gas THEN gas_limit1::text ELSE 'null' END
                 || ',"max_fee_per_gas":' || CASE WHEN caller_fees THEN max_fee1::text ELSE 'null' END
                 || ',"max_priority_fee_per_gas":' || CASE WHEN caller_fees THEN prio1::text ELSE 'null' END
                 || CASE WHEN private THEN ',"private":true' ELSE '' END
                 || CASE WHEN valid_until IS NOT NULL THEN ',"valid_until":"' || valid_until || '"' ELSE '' END
                 || '}')::jsonb,
                CASE WHEN has_nonce THEN nonce_at END,
                state, sub_state,
                CASE WHEN has_nonce THEN last_hash END,
                CASE WHEN has_nonce THEN last_hash END,
                -- The receipt as alloy serialises an RPC TransactionReceipt.
                CASE WHEN has_nonce THEN (
                    '{"type":"0x2","status":"' || CASE WHEN kind = 'failed' THEN '0x0' ELSE '0x1' END
                    || '","cumulativeGasUsed":"0x' || to_hex(gas_used_ok + r11 * 21000)
                    || '","logs":' || CASE WHEN erc20 AND kind = 'confirmed' THEN
                           '[{"address":"' || token_addr || '","topics":['
                           || '"0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",'
                           || '"0x000000000000000000000000' || substr(submitter, 3) || '",'
                           || '"0x000000000000000000000000' || rcpt40 || '"],"data":"0x'
                           || lpad(to_hex(token_amount), 64, '0')
                           || '","blockHash":"' || block_hash
                           || '","blockNumber":"0x' || to_hex(block_number)
                           || '","blockTimestamp":"0x' || to_hex(floor(extract(epoch FROM mined_at))::bigint)
                           || '","transactionHash":"' || last_hash
                           || '","transactionIndex":"0x' || to_hex(r11 % 40)
                           || '","logIndex":"0x' || to_hex(r11 % 40 + r19 % 3)
                           || '","removed":false}]'
                        ELSE '[]' END
                    || ',"logsBloom":"0x' || CASE WHEN erc20 AND kind = 'confirmed' THEN
                           overlay(overlay(overlay(overlay(overlay(overlay(repeat('0', 512)
                               PLACING '8' FROM (1 + (r11 * 7) % 512)::int FOR 1)
                               PLACING '2' FROM (1 + (r11 * 13 + 101) % 512)::int FOR 1)
                               PLACING '1' FROM (1 + (r11 * 29 + 307) % 512)::int FOR 1)
                               PLACING '4' FROM (1 + (si * 7 + r67) % 512)::int FOR 1)
                               PLACING '8' FROM (1 + (r67 * 3) % 512)::int FOR 1)
                               PLACING '2' FROM (1 + (r810 % 512))::int FOR 1)
                        ELSE repeat('0', 512) END
                    || '","transactionHash":"' || last_hash
                    || '","transactionIndex":"0x' || to_hex(r11 % 40)
                    || '","blockHash":"' || block_hash
                    || '","blockNumber":"0x' || to_hex(block_number)
                    || '","gasUsed":"0x' || to_hex(CASE WHEN kind = 'failed' THEN 23000 + r19 * 20
                                                        WHEN kind = 'cancelled_mined' THEN 21000
                                                        ELSE gas_used_ok END)
                    || '","effectiveGasPrice":"0x' || to_hex(base_fee + prio1)
                    || '","from":"' || submitter
                    || '","to":"' || CASE WHEN kind = 'cancelled_mined' THEN submitter
                                          WHEN erc20 THEN token_addr ELSE '0x' || rcpt40 END
                    || '","contractAddress":null}')::jsonb
                END,
                CASE WHEN has_nonce THEN block_number END,
                CASE WHEN has_nonce THEN block_hash END,
                CASE WHEN has_nonce THEN CASE WHEN bumped OR kind = 'cancelled_mined' THEN 2 ELSE 1 END ELSE 0 END,
                CASE WHEN has_nonce THEN CASE WHEN bumped OR kind = 'cancelled_mined' THEN bcast2_at ELSE bcast1_at END END,
                -- next_resubmit_at: cleared at finality; a refused rejection
                -- keeps the one its allocation set
                CASE WHEN kind = 'rejected_refused' THEN alloc_at + interval '30 seconds' END,
                last_error,
                token,
                created_at, done_at,
                CASE WHEN has_nonce THEN done_at END,
                CASE WHEN bumped OR kind = 'cancelled_mined' THEN 1 ELSE 0 END,
                CASE WHEN has_nonce THEN bcast1_at END,
                NULL, NULL,
                CASE WHEN kind = 'rejected_refused' THEN alloc_at END,
                CASE WHEN has_nonce OR kind = 'rejected_refused' THEN alloc_at END,
                false, NULL,
                CASE WHEN has_nonce THEN h1 END
              FROM g
            RETURNING 1
        ),
        attempts AS (
            -- the first attempt (original): every intent given a nonce, and
            -- the refused rejections (whose nonce went back)
            SELECT tx_id, 1 AS attempt_no, nonce_at AS nonce, h1 AS hash, 'original' AS kind,
                   max_fee1 AS max_fee, prio1 AS prio, gas_limit1 AS gas_limit,
                   CASE WHEN bumped THEN NULL
                        WHEN kind = 'rejected_refused' THEN last_error END AS broadcast_result,
                   alloc_at AS at, token, chain_id,
                   CASE WHEN erc20 THEN substr(token_addr, 3) ELSE rcpt40 END AS to40,
                   CASE WHEN erc20 THEN '80' ELSE '88' || lpad(to_hex(value_wei), 16, '0') END AS value_rlp,
                   CASE WHEN erc20 THEN 'b844a9059cbb' || lpad(rcpt40, 64, '0') || lpad(to_hex(token_amount), 64, '0')
                        ELSE '80' END AS data_rlp,
                   h || '\x04'::bytea AS seed
              FROM g WHERE has_nonce OR kind = 'rejected_refused'
            UNION ALL
            -- the second: a fee bump, or the cancel (a 0-value transfer to
            -- itself), each at 9/8 of the fees
            SELECT tx_id, 2, nonce_at, h2, CASE WHEN bumped THEN 'bump' ELSE 'cancel' END,
                   ceil(max_fee1 * 1.125)::bigint, ceil(prio1 * 1.125)::bigint,
                   CASE WHEN bumped THEN gas_limit1 ELSE 21000 END,
                   'accepted',
                   bcast2_at - interval '5 milliseconds', token, chain_id,
                   CASE WHEN bumped THEN CASE WHEN erc20 THEN substr(token_addr, 3) ELSE rcpt40 END
                        ELSE substr(submitter, 3) END,
                   CASE WHEN bumped AND NOT erc20 THEN '88' || lpad(to_hex(value_wei), 16, '0') ELSE '80' END,
                   CASE WHEN bumped AND erc20 THEN 'b844a9059cbb' || lpad(rcpt40, 64, '0') || lpad(to_hex(token_amount), 64, '0')
                        ELSE '80' END,
                   h || '\x05'::bytea
              FROM g WHERE bumped OR kind = 'cancelled_mined'
        ),
        ins_attempts AS (
            INSERT INTO tx_attempt (tx_id, attempt_no, nonce, tx_hash, raw_tx, max_fee_per_gas,
                                    max_priority_fee_per_gas, gas_price, gas_limit, kind,
                                    broadcast_result, created_at, fencing_token)
            SELECT tx_id, attempt_no, nonce, hash,
                   -- EIP-1559 envelope: chain id, nonce, fees, gas, to, value,
                   -- data, empty access list, y parity, r, s
                   decode('02f872' || '83' || lpad(to_hex(chain_id), 6, '0')
                          || '83' || lpad(to_hex(nonce), 6, '0')
                          || '84' || lpad(to_hex(prio), 8, '0')
                          || '85' || lpad(to_hex(max_fee), 10, '0')
                          || '83' || lpad(to_hex(gas_limit), 6, '0')
                          || '94' || to40 || value_rlp || data_rlp || 'c001'
                          || 'a0' || encode(sha256(seed || '\x72'::bytea), 'hex')
                          || 'a0' || encode(sha256(seed || '\x73'::bytea), 'hex'), 'hex'),
                   max_fee, prio, NULL, gas_limit, kind, broadcast_result, at, token
              FROM attempts ORDER BY at  -- as they were signed
        ),
        -- The feed: one row per final intent, in the order they finished.
        ins_feed AS (
            INSERT INTO tx_completion (tx_id, chain_id, submitter, request_id, state, completed_at,
                                       tx_hash, block_number, nonce, reason)
            SELECT tx_id, chain_id, submitter, request_id, state, done_at,
                   CASE WHEN has_nonce THEN last_hash END,
                   CASE WHEN has_nonce THEN block_number END,
                   CASE WHEN has_nonce THEN nonce_at END,
                   last_error
              FROM g ORDER BY done_at
        ),
        -- Operator actions: a cancel for every cancelled intent, a third of
        -- the bumps asked for (speedup), a few re-broadcasts, and about one
        -- submitter or node action per 100 intents.
        audit AS (
            SELECT tx_id, chain_id, submitter, r14, r15, r18, i,
                   CASE WHEN kind = 'cancelled_queued' THEN done_at
                        ELSE bcast2_at - interval '1 second' END AS at,
                   'tx_cancel' AS action
              FROM g WHERE kind IN ('cancelled_queued', 'cancelled_mined')
            UNION ALL
            SELECT tx_id, chain_id, submitter, r14, r15, r18, i,
                   bcast2_at - interval '1 second', 'tx_speedup'
              FROM g WHERE bumped AND r14 < 26
            UNION ALL
            SELECT tx_id, chain_id, submitter, r14, r15, r18, i,
                   bcast1_at + interval '20 seconds', 'tx_rebroadcast'
              FROM g WHERE kind = 'confirmed' AND NOT bumped AND r15 < 2
            UNION ALL
            SELECT NULL, chain_id, submitter, r14, r15, r18, i, created_at,
                   (ARRAY['pause', 'resume', 'restart', 'unprotect', 'reload', 'top_up'])[1 + r18 % 6]
              FROM g WHERE i % 97 = 41
        ),
        ins_audit AS (
            INSERT INTO ops_audit (at, actor, action, submitter, reason, node_id, tx_id, outcome, chain_id)
            SELECT at,
                   (ARRAY['ops-alice', 'ops-bob', 'oncall', 'deploy-bot', 'anonymous'])[1 + r14 % 5],
                   action,
                   CASE WHEN action <> 'reload' THEN submitter END,
                   CASE WHEN r15 % 2 = 0 THEN NULL
                        ELSE (ARRAY['customer asked', 'stuck behind a low fee', 'incident 4711',
                                    'key rotation', 'duplicate payment', 'gas spike'])[1 + r18 % 6] END,
                   'txmgr-' || (i % 3),
                   tx_id,
                   CASE WHEN action = 'top_up' AND r15 < 26 THEN 'failed' ELSE 'done' END,
                   CASE WHEN action <> 'reload' THEN chain_id END
              FROM audit ORDER BY at
        )
        SELECT count(*) INTO STRICT loaded FROM ins_intents;
        lo := lo + chunk;
    END LOOP;

    IF rebuild THEN
        PERFORM set_config('maintenance_work_mem', '512MB', true);
        FOREACH loaded_ddl IN ARRAY ddl LOOP
            EXECUTE loaded_ddl;
        END LOOP;
    END IF;

    -- The nonce cursors: next_nonce is what every key's intents used
    -- (nonces 0 .. next_nonce - 1, none released); the token of its last
    -- intent.
    INSERT INTO submitter_nonce_cursor (chain_id, submitter, next_nonce, released, fencing_token, updated_at)
    SELECT first_chain + k % chains,
           '0x' || md5('txmgr-history-submitter-' || (k / chains))
                || left(md5('txmgr-history-submitter-b-' || (k / chains)), 8),
           cnt - (cnt + 32) / 50 - (cnt + 98) / 200,
           '{}',
           CASE WHEN cnt = 0 THEN 1 ELSE 1 + ((k + (cnt - 1) * kk) * 8) / n + k % 3 END,
           now()
      FROM (SELECT k, CASE WHEN k < n THEN (n - 1 - k) / kk + 1 ELSE 0 END AS cnt
              FROM generate_series(0, kk - 1) AS k) c;

    -- Statistics now (autovacuum may be off, and the phase that follows
    -- plans its reads on them); the rows of this transaction are sampled.
    ANALYZE managed_tx, tx_attempt, tx_completion, ops_audit, submitter_nonce_cursor;
END
$history$;

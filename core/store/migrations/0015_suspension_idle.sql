-- Idle detection for suspension (issue 16), on the database clock.
--
-- A Session may be suspended only after at least one of its Turns ended,
-- with nothing queued or running, and when its last real activity is at
-- least its generation's suspension idle time old by elapsed database
-- time. Real activity is a Turn submitted (turns.created_at) or a Turn
-- ending (turns.ended_at), both written with now() in the transaction
-- that makes the change: the first terminal Turn is thereby recorded with
-- the database clock in its own transaction, and Core's and the database
-- host's clocks need not agree. Keepalives, observations and Runtime
-- connections never count as activity: none of them touches turns.
--
-- session_idle_since is that one definition, shared by the lifecycle
-- worker's candidate scan and by the Session-locked recheck that must
-- repeat it before a suspension is armed: the time the Session became
-- idle, or NULL while it has no ended Turn or has one queued or running.

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION session_idle_since(s uuid) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN bool_or(t.state IN ('queued', 'running')) THEN NULL
        WHEN bool_or(t.ended_at IS NOT NULL) THEN max(greatest(t.created_at, t.ended_at))
    END
    FROM turns t
    WHERE t.session_id = s
$$;
-- +goose StatementEnd

-- Subscriptions: fan-out at accept (issue 46). An operator's subscription
-- names a subscriber and a namespace pattern (the tokens' glob syntax, kept
-- as SQL LIKE in like_pattern as flow rules keep theirs); an event Accept
-- inserts into a matching namespace is inserted again, in the same
-- statement and so the same transaction, as a copy of the subscriber's own:
-- namespace `<name>/<origin namespace>`, same key, type, payload and the
-- rest (store/queries/accepts.sql). The table holds a handful of rows, read
-- whole by the accept statement; empty, it costs that statement one probe.
CREATE TABLE inbox_subscriptions (
    name              text        PRIMARY KEY,
    namespace_pattern text        NOT NULL,
    like_pattern      text        NOT NULL,
    -- Empty: every event type.
    event_types       text[]      NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL,
    created_by        text        NOT NULL,
    -- A copy's namespace starts with the name and a slash: a name holding a
    -- glob star, or ending in a slash, would make copy names grants misread.
    CONSTRAINT inbox_subscriptions_name_plain CHECK (name <> '' AND strpos(name, '*') = 0 AND right(name, 1) <> '/')
);

-- Every creation and removal, as flow rules' changes are audited (0021):
-- who, when, why, and the subscription before and after in words.
CREATE TABLE inbox_subscription_changes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL,
    actor      text        NOT NULL,
    reason     text        NOT NULL,
    before     text        NOT NULL,
    after      text        NOT NULL,
    changed_at timestamptz NOT NULL
);

CREATE INDEX inbox_subscription_changes_name ON inbox_subscription_changes (name, id);

-- A bulk operation COPY (issue 46): a subscription created later copies the
-- past only when asked, as REPLAY and IGNORE act on the past. `subscription`
-- names the subscription whose copies it makes ('' for the other actions).
-- The operation's row is the act's audit (who, when, why, the filter); the
-- copies it inserts are new events, with no earlier state to record.
ALTER TABLE inbox_bulk_operations ADD COLUMN subscription text NOT NULL DEFAULT '';
ALTER TABLE inbox_bulk_operations DROP CONSTRAINT inbox_bulk_operations_action_known;
ALTER TABLE inbox_bulk_operations ADD CONSTRAINT inbox_bulk_operations_action_known
    CHECK (action IN ('replay', 'ignore', 'copy'));
ALTER TABLE inbox_bulk_operations ADD CONSTRAINT inbox_bulk_operations_copy_names_its_subscription
    CHECK ((action = 'copy') = (subscription <> ''));

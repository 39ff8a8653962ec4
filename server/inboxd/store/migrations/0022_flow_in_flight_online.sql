-- inboxd: no transaction
-- The leased events of each namespace, for max_in_flight (0021,
-- inboxd_flow_slots): only PROCESSING rows, so it stays as small as what is
-- in flight, whatever the backlog. Built without blocking writes (see
-- 0020); an index left invalid by an interrupted build is dropped first.
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_in_flight;
CREATE INDEX CONCURRENTLY inbox_events_in_flight ON inbox_events (namespace COLLATE "C") WHERE state = 'processing';

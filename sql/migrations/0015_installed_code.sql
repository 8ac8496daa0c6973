-- pgtimers migration 0015: installed code.
--
-- Versioned: applied once, in order, and frozen once released (docs/design.md).

-- Every application of sql/code/, with the checksum of its files: an install whose
-- code is the one applied last changes nothing, and says so.
CREATE TABLE timers.installed_code (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    checksum   text NOT NULL,
    files      integer NOT NULL,
    revision   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    applied_by name NOT NULL DEFAULT current_user
);

-- pgtimers code: save-time checks of names and of a timer's SQL.
--
-- Repeatable: applied whole on every install and upgrade, after the versioned
-- migrations (docs/design.md). Each object here is defined in this file only.

-- The lexer's regular expression. Every alternative consumes at least one
-- character and the last one any character, so the matches of
-- regexp_matches(sql, pattern, 'g') tile the whole text in order: a token's
-- position is the sum of the lengths before it. No capturing groups
-- (regexp_matches would return them instead of the match); the longest match wins
-- at each position, which is also how PostgreSQL's scanner decides (E'..' over a
-- word E, '' inside '..'). (?:[A-Za-z_]|[^\x01-\x7f]) is the scanner's
-- ident_start: a letter, '_' or any non-ASCII character.
-- The cost is in the number of matches, so:
--   coarse = false: one token per SQL token, each with the whitespace before it;
--   coarse = true: a run of plain code (words, numbers, operators, punctuation,
--     whitespace) is one token; strings, quoted identifiers, comments and dollar
--     quotes are tokens of their own.
CREATE OR REPLACE FUNCTION timers._sql_lex_pattern(coarse boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    -- block comment, nested up to six deep (deeper: see _sql_tokens)
    comment text := '/\*(?:[^*/]|\*(?!/)|/(?!\*))*\*/';
BEGIN
    FOR i IN 2 .. 6 LOOP
        comment := '/\*(?:[^*/]|\*(?!/)|/(?!\*)|' || comment || ')*\*/';
    END LOOP;
    RETURN
    CASE WHEN coarse THEN '(?:' ELSE '[ \t\n\r\f\v]*(?:' END
    -- line comment
    || '--[^\n\r]*'
    || '|' || comment
    -- a comment opener the alternative above did not close
    || '|/\*'
    -- E'..' string with backslash escapes (or unterminated, to the end)
    || '|[Ee]''(?:[^''\\]|''''|\\[\s\S])*(?:''|\\?$)'
    -- '..' string with '' escapes (standard_conforming_strings = on)
    || '|''(?:[^'']|'''')*(?:''|$)'
    -- "quoted identifier"
    || '|"(?:[^"]|"")*(?:"|$)'
    -- $$..$$ whose body has no '$$' (the scanner ends it there) and no '$tag$' (lexed
    -- as code, the inside of a $tag$ quote must not run past its end: see _sql_tokens)
    || '|\$\$(?:[^$]|\$(?:[\x01-\x23\x25-\x40\x5b-\x5e\x60\x7b-\x7f]'
    ||     '|(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_]|[^\x01-\x7f])*'
    ||     '[\x01-\x23\x25-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]))*\$\$'
    -- other dollar-quote tags, and an unterminated $$: the body is found by _sql_tokens
    || '|\$(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_]|[^\x01-\x7f])*\$|\$\$'
    || CASE WHEN coarse THEN
           -- a run of code: words (an E or e only where it cannot start E'..'),
           -- digits with any identifier glued to them (as the scanner takes them),
           -- parameters, and any other character that cannot start a string,
           -- quoted identifier, comment or dollar quote
           '|(?:(?:[A-DF-Za-df-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*'
           || '|[Ee](?:[A-Za-z0-9_$]|[^\x01-\x7f])+|[Ee](?!'')'
           || '|[0-9]+(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*)?'
           || '|\$[0-9]+(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*)?|-(?!-)|/(?!\*)'
           || '|[\x01-\x21\x23\x25\x26\x28-\x2c\x2e\x3a-\x40\x5b-\x5e\x60\x7b-\x7f])+'
           || '|[\s\S])'
       ELSE
           -- parameter $1 (with any junk glued to it)
           '|\$[0-9]+(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*)?'
           -- identifier or keyword
           || '|(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*'
           -- number (with any junk glued to it, as the scanner reports it)
           || '|(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[Ee][+-]?[0-9_]+)?'
           || '(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_$]|[^\x01-\x7f])*)?'
           -- operator: never swallows the start of a comment
           || '|(?:[~!@#^&|`?+*%<>=]|-(?!-)|/(?!\*))+'
           -- anything else, one character: , ( ) [ ] ; : . \ $
           || '|[\s\S])'
           -- whitespace at the end
           || '|[ \t\n\r\f\v]+'
       END;
END
$fn$;

-- Every place of a text where a dollar quote can end, in order: position (1-based),
-- byte offset (0-based) and the delimiter ('$$', '$tag$'). Inside a body the
-- scanner stops only at '$': "$ident$" ends the body when it is the opening tag,
-- else its last '$' may start the next delimiter. So: tile the text into runs
-- without '$' and "$ident" pieces; each piece followed by a '$' is a delimiter.
CREATE OR REPLACE FUNCTION timers._sql_dollar_delimiters(sql text,
                                                       OUT pos integer[], OUT bytes integer[], OUT tags text[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
#variable_conflict use_column
BEGIN
    SELECT x.* INTO pos, bytes, tags FROM (
SELECT coalesce(array_agg(d.p ORDER BY d.i), '{}'), coalesce(array_agg(d.b ORDER BY d.i), '{}'),
       coalesce(array_agg(d.tag ORDER BY d.i), '{}')
  FROM (SELECT r.i, r.m[1] || '$' AS tag, starts_with(r.m[1], '$') AS dollar,
               lead(left(r.m[1], 1)) OVER w = '$' AS closed,
               (sum(length(r.m[1])) OVER w - length(r.m[1]) + 1)::integer AS p,
               (sum(octet_length(r.m[1])) OVER w - octet_length(r.m[1]))::integer AS b
          FROM regexp_matches(sql, '[^$]+|\$(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_]|[^\x01-\x7f])*)?', 'g')
               WITH ORDINALITY AS r(m, i)
        WINDOW w AS (ORDER BY r.i ROWS UNBOUNDED PRECEDING)) d
 WHERE d.dollar AND d.closed) x;
END
$fn$;

-- Every '/*' and '*/' of a text, in order: position (1-based), byte offset (0-based),
-- and whether it is '/*'. Overlapping ones ('/*/') are both listed: whoever scans
-- skips a delimiter that starts inside the one before.
CREATE OR REPLACE FUNCTION timers._sql_comment_delimiters(sql text,
                                                        OUT pos integer[], OUT bytes integer[], OUT opens boolean[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
#variable_conflict use_column
BEGIN
    SELECT x.* INTO pos, bytes, opens FROM (
SELECT coalesce(array_agg(c.p ORDER BY c.p), '{}'), coalesce(array_agg(c.b ORDER BY c.p), '{}'),
       coalesce(array_agg(c.open ORDER BY c.p), '{}')
  FROM (SELECT (sum(length(r.m[1])) OVER w - length(r.m[1]) + 1)::integer AS p,
               (sum(octet_length(r.m[1])) OVER w - octet_length(r.m[1]))::integer AS b,
               true AS open, r.m[1] AS m
          FROM regexp_matches(sql, '[^/]+|/\*|/', 'g') WITH ORDINALITY AS r(m, i)
        WINDOW w AS (ORDER BY r.i ROWS UNBOUNDED PRECEDING)
        UNION ALL
        SELECT (sum(length(r.m[1])) OVER w - length(r.m[1]) + 1)::integer,
               (sum(octet_length(r.m[1])) OVER w - octet_length(r.m[1]))::integer,
               false, r.m[1]
          FROM regexp_matches(sql, '[^*]+|\*/|\*', 'g') WITH ORDINALITY AS r(m, i)
        WINDOW w AS (ORDER BY r.i ROWS UNBOUNDED PRECEDING)) c
 WHERE c.m IN ('/*', '*/')) x;
END
$fn$;

-- The first index from p_from on whose element is at least p_value, in an array sorted
-- ascending (cardinality + 1 when there is none): a binary search.
CREATE OR REPLACE FUNCTION timers._first_at_least(p_sorted integer[], p_value integer,
                                                  p_from integer DEFAULT 1)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    lo integer := p_from;
    hi integer := coalesce(cardinality(p_sorted), 0) + 1;
    mid integer;
BEGIN
    WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF p_sorted[mid] < p_value THEN
            lo := mid + 1;
        ELSE
            hi := mid;
        END IF;
    END LOOP;
    RETURN lo;
END
$fn$;

-- The tokens of a text: n (their order; folded tokens leave gaps), pos (1-based
-- character position), tok and kind:
--   't' comment, 's' string constant ('..', E'..', $$..$$, $fn$..$fn$),
--   'q' "quoted identifier", and
--   coarse = false: 'w' word (identifier or keyword), ';', '(', ')', 'o' anything
--     else (operators, numbers, punctuation, parameters, a stray backslash);
--     whitespace is no token;
--   coarse = true: 'c' a run of code, whitespace included (the tokens tile the text).
-- Works on any text, valid SQL or not (unterminated literals run to the end).
-- Linear in the text: see the comments inside.
CREATE OR REPLACE FUNCTION timers._sql_tokens(sql text, coarse boolean DEFAULT false)
RETURNS TABLE (n integer, pos integer, tok text, kind text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    pat constant text := timers._sql_lex_pattern(coarse);
    enc constant name := getdatabaseencoding();
    blank constant text := E' \t\n\r\f\x0b';   -- whitespace, as the scanner counts it
    -- a dollar-quote tag on its own
    tag constant text := '^[ \t\n\r\f\v]*\$(?:(?:[A-Za-z_]|[^\x01-\x7f])(?:[A-Za-z0-9_]|[^\x01-\x7f])*)?\$$';
    total integer;          -- characters
    totalb integer;         -- bytes
    sqlbytes bytea;         -- the text as bytes: a slice of a text costs a walk from its start
    -- the tokens so far: text and position; tokens skip_from[j] .. skip_to[j] - 1 were
    -- lexed inside a dollar quote or comment and are part of the token before them
    toks text[] := '{}'::text[];
    starts integer[] := '{}'::integer[];
    skip_from integer[] := '{}'::integer[];
    skip_to integer[] := '{}'::integer[];
    -- the window being lexed: its tokens, positions, byte offsets, special tokens
    wtxt text;
    wt text[];
    ws integer[];
    wb integer[];
    wsp integer[];
    wskip_from integer[];
    wskip_to integer[];
    s integer := 1;         -- window start: position, byte offset
    sb integer := 0;
    wend integer;           -- window end: last position, byte offset after it
    wendb integer;
    next_s integer;
    next_sb integer;
    cut integer;            -- the window's tokens 1 .. cut are final
    covered integer;
    mi integer := 1;        -- next dollar-quote delimiter that may end a window
    ci integer := 1;        -- next comment delimiter that may end a window
    -- every place a dollar-quote delimiter can close a body: position, byte offset, tag
    dpos integer[];
    dbyte integer[];
    dtag text[];
    -- every '/*' and '*/': position, byte offset, which
    cpos integer[];
    cbyte integer[];
    copen boolean[];
    i integer;
    j integer;
    p integer;
    e integer;
    eb integer;
    t text;
    depth integer;
    lo integer;
BEGIN
    IF sql IS NULL OR sql = '' THEN
        RETURN;
    END IF;
    sql := sql || '';   -- a compressed value would be decompressed by every call below
    total := length(sql);
    totalb := octet_length(sql);

    -- The text is lexed with one regexp pass. Special tokens open a dollar quote
    -- other than $$..$$ (or an unterminated one), or a comment the pattern could
    -- not close (nested deeper, or unterminated): where they end is found from
    -- lists of delimiters, and the tokens lexed inside are folded into one. When a
    -- token lexed inside runs past the end (the lexing inside a dollar quote is
    -- garbage: an odd quote, or '$$'), the rest is lexed again, in windows that end
    -- at the next dollar-quote delimiter, so that no text is lexed many times.
    LOOP
        EXIT WHEN s > total;
        IF s = 1 THEN
            wtxt := sql;
            wend := total;
            wendb := totalb;
        ELSE
            IF dpos IS NULL THEN
                SELECT d.pos, d.bytes, d.tags INTO dpos, dbyte, dtag FROM timers._sql_dollar_delimiters(sql) AS d;
            END IF;
            -- the window ends at the next dollar-quote tag other than $$ or, once
            -- deep comments were seen, at the next '/*'
            WHILE mi <= cardinality(dpos) AND (dtag[mi] = '$$' OR dpos[mi] + length(dtag[mi]) - 1 < s) LOOP
                mi := mi + 1;
            END LOOP;
            WHILE ci <= coalesce(cardinality(cpos), 0) AND (NOT copen[ci] OR cpos[ci] + 1 < s) LOOP
                ci := ci + 1;
            END LOOP;
            wend := total;
            wendb := totalb;
            IF mi <= cardinality(dpos) THEN
                wend := dpos[mi] + length(dtag[mi]) - 1;
                wendb := dbyte[mi] + octet_length(dtag[mi]);
            END IF;
            IF ci <= coalesce(cardinality(cpos), 0) AND cpos[ci] + 1 < wend THEN
                wend := cpos[ci] + 1;
                wendb := cbyte[ci] + 2;
                ci := ci + 1;
            ELSIF mi <= cardinality(dpos) THEN
                mi := mi + 1;
            END IF;
            IF sqlbytes IS NULL THEN
                sqlbytes := convert_to(sql, enc);
            END IF;
            wtxt := convert_from(substr(sqlbytes, sb + 1, wendb - sb), enc);
        END IF;
        -- the tokens, their positions and byte offsets, which are special
        SELECT array_agg(x.m[1] ORDER BY x.o), array_agg(x.p ORDER BY x.o), array_agg(x.b ORDER BY x.o),
               array_agg(x.o::integer ORDER BY x.o)
                   FILTER (WHERE right(x.m[1], 2) = '/*' AND ltrim(x.m[1], blank) = '/*'
                              OR right(x.m[1], 1) = '$' AND x.m[1] ~ tag)
          INTO wt, ws, wb, wsp
          FROM (SELECT r.m, r.o,
                       (s - 1 + sum(length(r.m[1])) OVER w - length(r.m[1]) + 1)::integer AS p,
                       (sb + sum(octet_length(r.m[1])) OVER w - octet_length(r.m[1]))::integer AS b
                  FROM regexp_matches(wtxt, pat, 'g') WITH ORDINALITY AS r(m, o)
                WINDOW w AS (ORDER BY r.o ROWS UNBOUNDED PRECEDING)) x;

        -- A window that stops short of the end may have cut its last token short
        -- (not a dollar-quote tag, though: those are whole): it is lexed again.
        cut := cardinality(wt);
        IF wend < total AND wt[cut] !~ tag THEN
            cut := cut - 1;
        END IF;
        next_s := CASE WHEN cut < cardinality(wt) THEN ws[cut + 1] ELSE wend + 1 END;
        next_sb := CASE WHEN cut < cardinality(wt) THEN wb[cut + 1] ELSE wendb END;
        wskip_from := '{}'::integer[];
        wskip_to := '{}'::integer[];
        covered := s - 1;

        FOREACH i IN ARRAY coalesce(wsp, '{}'::integer[]) LOOP
            EXIT WHEN i > cut;
            t := ltrim(wt[i], blank);
            p := ws[i] + length(wt[i]) - length(t);
            CONTINUE WHEN p <= covered;
            IF t = '/*' THEN
                IF cpos IS NULL THEN
                    SELECT c.pos, c.bytes, c.opens INTO cpos, cbyte, copen FROM timers._sql_comment_delimiters(sql) AS c;
                END IF;
                lo := timers._first_at_least(cpos, p);   -- the '/*' at p
                depth := 0;
                e := p - 1;          -- scanned up to here
                j := lo;
                LOOP
                    IF j > cardinality(cpos) THEN
                        e := total;
                        eb := totalb;
                        EXIT;
                    END IF;
                    IF cpos[j] > e THEN   -- not overlapping the last one: '/*/' is one opener
                        IF copen[j] THEN depth := depth + 1; ELSE depth := depth - 1; END IF;
                        e := cpos[j] + 1;
                        eb := cbyte[j] + 2;
                        EXIT WHEN depth = 0;
                    END IF;
                    j := j + 1;
                END LOOP;
            ELSE
                IF dpos IS NULL THEN
                    SELECT d.pos, d.bytes, d.tags INTO dpos, dbyte, dtag FROM timers._sql_dollar_delimiters(sql) AS d;
                END IF;
                -- the first delimiter after the opening tag that is the same tag
                lo := timers._first_at_least(dpos, p + length(t));
                WHILE lo <= cardinality(dpos) AND dtag[lo] <> t LOOP
                    lo := lo + 1;
                END LOOP;
                IF lo > cardinality(dpos) THEN
                    e := total;
                    eb := totalb;
                ELSE
                    e := dpos[lo] + length(t) - 1;
                    eb := dbyte[lo] + octet_length(t);
                END IF;
            END IF;
            covered := e;
            IF sqlbytes IS NULL THEN
                sqlbytes := convert_to(sql, enc);
            END IF;
            wt[i] := convert_from(substr(sqlbytes, wb[i] + 1, eb - wb[i]), enc);
            IF e < wend THEN
                -- The token lexed right after it, if the lexing inside left one
                -- there: from a token's start on, the tokens are what lexing from
                -- there gives (a token's extent depends on what follows only).
                lo := timers._first_at_least(ws, e + 1, i);
                IF lo <= cardinality(ws) AND ws[lo] = e + 1 THEN
                    IF lo - 1 > i THEN
                        wskip_from := wskip_from || (i + 1);
                        wskip_to := wskip_to || lo;
                    END IF;
                    CONTINUE;
                END IF;
            END IF;
            -- it ends past this window, or a token lexed inside it runs past its
            -- end: lex again from its end
            cut := i;
            next_s := e + 1;
            next_sb := eb;
            EXIT;
        END LOOP;

        -- keep the window's tokens 1 .. cut
        IF cardinality(toks) = 0 THEN
            IF cut = cardinality(wt) THEN
                toks := wt;
                starts := ws;
            ELSE
                toks := wt[1:cut];
                starts := ws[1:cut];
            END IF;
            skip_from := wskip_from;
            skip_to := wskip_to;
        ELSE
            j := 1;   -- next skipped range
            i := 1;
            WHILE i <= cut LOOP
                IF j <= cardinality(wskip_from) AND i = wskip_from[j] THEN
                    i := wskip_to[j];
                    j := j + 1;
                    CONTINUE;
                END IF;
                toks := array_append(toks, wt[i]);
                starts := array_append(starts, ws[i]);
                i := i + 1;
            END LOOP;
        END IF;
        s := next_s;
        sb := next_sb;
    END LOOP;

    RETURN QUERY
    SELECT v.o::integer, v.p + length(v.t) - length(v.tt), v.tt,
           CASE ascii(v.tt)
               WHEN 45 THEN CASE WHEN v.tt LIKE '--%' THEN 't' WHEN coarse THEN 'c' ELSE 'o' END   -- -
               WHEN 47 THEN CASE WHEN v.tt LIKE '/*%' THEN 't' WHEN coarse THEN 'c' ELSE 'o' END   -- /
               WHEN 39 THEN 's'                                                         -- '
               WHEN 34 THEN 'q'                                                         -- "
               WHEN 36 THEN                                                             -- $
                   CASE WHEN v.tt ~ '^\$[0-9]' OR v.tt = '$' THEN CASE WHEN coarse THEN 'c' ELSE 'o' END
                        ELSE 's' END
               WHEN 69 THEN CASE WHEN substr(v.tt, 2, 1) = '''' THEN 's' WHEN coarse THEN 'c' ELSE 'w' END
               WHEN 101 THEN CASE WHEN substr(v.tt, 2, 1) = '''' THEN 's' WHEN coarse THEN 'c' ELSE 'w' END
               ELSE CASE
                   WHEN coarse THEN 'c'
                   WHEN v.tt IN (';', '(', ')') THEN v.tt
                   WHEN v.tt ~ '^(?:[A-Za-z_]|[^\x01-\x7f])' THEN 'w'
                   ELSE 'o'
               END
           END
      FROM (SELECT u.o, u.p, u.t, CASE WHEN coarse THEN u.t ELSE ltrim(u.t, blank) END AS tt
              FROM unnest(toks, starts) WITH ORDINALITY AS u(t, p, o)
             WHERE cardinality(skip_from) = 0
                OR NOT (u.o::integer <@ (SELECT range_agg(int4range(r.f, r.t))
                                           FROM unnest(skip_from, skip_to) AS r(f, t)))) v
     WHERE v.tt <> '';
END
$fn$;

-- The first words of the statements _sql_refusal may refuse.
CREATE OR REPLACE FUNCTION timers._sql_refused_words()
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT ARRAY['CREATE', 'DROP', 'ALTER', 'GRANT', 'REVOKE', 'SET', 'RESET', 'DISCARD',
             'BEGIN', 'START', 'COMMIT', 'END', 'ROLLBACK', 'ABORT', 'SAVEPOINT', 'RELEASE',
             'PREPARE', 'DEALLOCATE', 'EXECUTE', 'DECLARE',
             'VACUUM', 'REINDEX', 'CLUSTER', 'LISTEN', 'UNLISTEN', 'LOAD', 'COPY']
$fn$;

-- The code of a text: the text with every comment, string constant and dollar
-- quote blanked out (a string becomes ' and blanks) and the inside of quoted
-- identifiers reduced to letters, digits and '_', all of the same length. What
-- is left can be read with plain string functions: every ';', '(', ')' and '\'
-- in it is code.
CREATE OR REPLACE FUNCTION timers._sql_code(sql text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
BEGIN
    RETURN (SELECT coalesce(string_agg(
           CASE k.kind
               WHEN 'c' THEN k.tok
               WHEN 's' THEN '''' || repeat(' ', length(k.tok) - 1)
               WHEN 't' THEN repeat(' ', length(k.tok))
               ELSE  -- 'q'
                   CASE WHEN length(k.tok) > 1 AND right(k.tok, 1) = '"'
                        THEN '"' || regexp_replace(substr(k.tok, 2, length(k.tok) - 2), '[^A-Za-z0-9_]', '_', 'g') || '"'
                        ELSE '"' || regexp_replace(substr(k.tok, 2), '[^A-Za-z0-9_]', '_', 'g')
                   END
           END, '' ORDER BY k.n), '')
  FROM timers._sql_tokens(sql, true) AS k);
END
$fn$;

-- Which parts of a text (numbered by the top-level ';' before them) continue the
-- statement before them. Given, in order, the parts that can open or close a
-- BEGIN ... END block: their numbers, whether they start CREATE [OR REPLACE]
-- FUNCTION/PROCEDURE, and their code outside parentheses. Blocks are counted as
-- psql does: only in those statements, CASE only inside a block (it ends with END
-- too), never below 0; a ';' inside a block does not end the statement (the body
-- of BEGIN ATOMIC ... END).
CREATE OR REPLACE FUNCTION timers._sql_continued(parts bigint[], routine boolean[], code text[])
RETURNS int8multirange
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    depth integer := 0;
    w text;
    lo bigint[] := '{}'::bigint[];
    hi bigint[] := '{}'::bigint[];
    result int8multirange;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(parts), 0) LOOP
        IF depth > 0 THEN
            -- the parts since the last one, this one included, are inside the block
            lo := lo || (parts[i - 1] + 1);
            hi := hi || parts[i];
        ELSIF NOT routine[i] THEN
            CONTINUE;
        END IF;
        FOR w IN
            SELECT upper(m[1])
              FROM regexp_matches(regexp_replace(code[i], '"[^"]*"', '', 'g'), '\m(begin|case|end)\M', 'gi') AS m
        LOOP
            IF w = 'BEGIN' THEN
                depth := depth + 1;
            ELSIF w = 'CASE' THEN
                IF depth > 0 THEN depth := depth + 1; END IF;
            ELSIF depth > 0 THEN   -- END
                depth := depth - 1;
            END IF;
        END LOOP;
    END LOOP;
    IF depth > 0 THEN   -- never closed: the rest
        lo := lo || (parts[cardinality(parts)] + 1);
        hi := hi || NULL::bigint;
    END IF;
    SELECT range_agg(int8range(r.lo, r.hi, '[]')) INTO result FROM unnest(lo, hi) AS r(lo, hi);
    RETURN coalesce(result, '{}'::int8multirange);
END
$fn$;

-- The top-level statements of a text: n, pos (of its first character), head and
-- has_on. A statement ends at a ';' outside parentheses, except inside the BEGIN
-- ATOMIC ... END body of CREATE [OR REPLACE] FUNCTION/PROCEDURE (tracked as psql
-- does it). Empty statements (';;') are left out.
-- head: the statement's first word, upper-cased, and when that word can start a
-- refused statement (see _sql_refusal) its first 16 tokens outside parentheses:
-- words upper-cased, "quoted identifiers" as written (reduced to letters, digits,
-- '_'), every string constant as '', any other character on its own.
-- has_on: for GRANT and REVOKE, the word ON appears outside parentheses (GRANT
-- on objects, not of roles).
CREATE OR REPLACE FUNCTION timers._sql_statements(sql text)
RETURNS TABLE (n integer, pos integer, head text[], has_on boolean)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
WITH r AS (
    -- the code, cut at every ';', '(' and ')': they are few, so this is cheap
    SELECT x.m[1] AS t, x.o,
           (sum(length(x.m[1])) OVER w - length(x.m[1]) + 1)::integer AS pos,
           coalesce(sum(CASE x.m[1] WHEN '(' THEN 1 WHEN ')' THEN -1 ELSE 0 END) OVER w, 0)
               - CASE x.m[1] WHEN '(' THEN 1 ELSE 0 END AS lvl
      FROM regexp_matches(timers._sql_code(sql), '[^;()]+|[;()]', 'g') WITH ORDINALITY AS x(m, o)
    WINDOW w AS (ORDER BY x.o ROWS UNBOUNDED PRECEDING)
), p AS (
    -- ... numbered by the part of the text between top-level ';' they are in
    SELECT r.*,
           coalesce(count(*) FILTER (WHERE r.t = ';' AND r.lvl <= 0)
                        OVER (ORDER BY r.o ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS part
      FROM r
), parts AS (
    SELECT q.*, upper(substring(q.top FROM '^[ \t\n\r\f\v]*([A-Za-z_]+)')) AS word
      FROM (SELECT p.part,
                   min(p.pos + length(p.t) - length(ltrim(p.t, E' \t\n\r\f\x0b')))
                       FILTER (WHERE p.t <> ';' AND ltrim(p.t, E' \t\n\r\f\x0b') <> '') AS pos,
                   string_agg(p.t, ' ' ORDER BY p.o) FILTER (WHERE p.lvl = 0 AND p.t NOT IN (';', '(', ')')) AS top
              FROM p
             GROUP BY p.part) q
     WHERE q.pos IS NOT NULL
), candidates AS (
    SELECT array_agg(pt.part ORDER BY pt.part) AS parts,
           string_agg(left(pt.top, 400), E'\x01' ORDER BY pt.part) AS tops
      FROM parts pt
     WHERE pt.word = ANY (timers._sql_refused_words())
), heads AS (
    -- their first tokens, split in one pass over all of them
    SELECT c.parts[h.i] AS part, (array_agg(h.tok ORDER BY h.o))[1:16] AS head
      FROM candidates c,
           LATERAL (SELECT x.o,
                           count(*) FILTER (WHERE x.m[1] = E'\x01') OVER (ORDER BY x.o) + 1 AS i,
                           CASE WHEN x.m[1] = '''' THEN ''''''
                                WHEN starts_with(x.m[1], '"') THEN x.m[1]
                                ELSE upper(x.m[1]) END AS tok
                      FROM regexp_matches(c.tops,
                               E'\x01|"[^"\x01]*"?|(?:[A-Za-z_]|[^\\x01-\\x7f])(?:[A-Za-z0-9_$]|[^\\x01-\\x7f])*|[^ \t\n\r\f\v\x01]',
                               'g') WITH ORDINALITY AS x(m, o)) h
     WHERE h.tok <> E'\x01'
     GROUP BY c.parts[h.i]
), stmts AS MATERIALIZED (
    SELECT pt.part, pt.pos, pt.top, coalesce(h.head, ARRAY[pt.word]) AS head,
           coalesce(h.head[1] = 'CREATE' AND (h.head[2] IN ('FUNCTION', 'PROCEDURE')
               OR h.head[2] = 'OR' AND h.head[3] = 'REPLACE' AND h.head[4] IN ('FUNCTION', 'PROCEDURE')), false)
               AS routine
      FROM parts pt
      LEFT JOIN heads h ON h.part = pt.part
), continued AS (
    -- parts that can open or close a block: routines, and parts starting with one of
    -- the words (others can only hold CASE ... END, which leaves the depth as it was)
    SELECT timers._sql_continued(array_agg(st.part ORDER BY st.part), array_agg(st.routine ORDER BY st.part),
                                 array_agg(st.top ORDER BY st.part)) AS parts
      FROM stmts st
     WHERE st.routine OR st.head[1] IN ('BEGIN', 'CASE', 'END')
)
SELECT (row_number() OVER (ORDER BY st.part))::integer, st.pos, st.head,
       st.head[1] IN ('GRANT', 'REVOKE') AND regexp_replace(st.top, '"[^"]*"', '', 'g') ~* '\mon\M'
  FROM stmts st
 WHERE NOT (st.part <@ (SELECT c.parts FROM continued c))
 ORDER BY st.part;
END
$fn$;

-- A statement head as the refusal rules read it: its words with one space between,
-- CREATE OR REPLACE as CREATE; for SET and RESET the setting's name unquoted and
-- upper-cased, after LOCAL or SESSION; for COPY only the direction and the word after
-- it (COPY TO PROGRAM); for GRANT and REVOKE only whether they are ON something.
CREATE OR REPLACE FUNCTION timers._sql_refusal_head(head text[], has_on boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    w text[] := head;
    j integer;
BEGIN
    IF w[1] IS NULL THEN
        RETURN NULL;
    END IF;
    CASE w[1]
    WHEN 'CREATE' THEN
        IF w[2] = 'OR' AND w[3] = 'REPLACE' THEN
            w := w[1:1] || w[4:];
        END IF;
    WHEN 'SET', 'RESET' THEN
        IF w[1] = 'SET' AND w[2] IN ('LOCAL', 'SESSION')
           AND w[3] IS DISTINCT FROM 'AUTHORIZATION' AND w[3] IS DISTINCT FROM 'CHARACTERISTICS' THEN
            w := w[1:1] || w[3:];
        END IF;
        -- a setting's name is case-insensitive, quoted or not: SET "Role" = ...
        IF w[2] LIKE '"%"' THEN
            w[2] := upper(replace(substr(w[2], 2, length(w[2]) - 2), '""', '"'));
        END IF;
    WHEN 'COPY' THEN
        SELECT min(u.o) INTO j FROM unnest(w) WITH ORDINALITY AS u(x, o) WHERE u.x IN ('TO', 'FROM');
        w := ARRAY['COPY'] || CASE WHEN j IS NULL THEN '{}'::text[] ELSE w[j:j + 1] END;
    WHEN 'GRANT', 'REVOKE' THEN
        w := CASE WHEN has_on THEN ARRAY[w[1], 'ON'] ELSE w[1:1] END;
    ELSE
        NULL;
    END CASE;
    RETURN array_to_string(w, ' ');
END
$fn$;

-- What the SQL check refuses, by statement head (timers._sql_refusal_head): the first
-- rule for the head's first word (words) whose pattern matches the head's start, in
-- order n. statement names it in
-- messages (\1, \2: the pattern's groups); reason says why; hint, when not NULL, how
-- to do it all the same.
-- For an autonomous timer (p_autonomous: its SQL runs in a session of the owner's own
-- login, statement by statement, outside any transaction block) the rules that exist only
-- because a run is one transaction are lifted: transaction control, savepoints, and the
-- statements PostgreSQL cannot run inside a transaction block. For a timer that is not,
-- those rules hint at autonomous => true. What leaves the database or the owner's identity
-- stays refused either way, and so does what changes the session beyond the statement (the
-- runner drives that session too: it sets the run's settings and time limit there).
CREATE OR REPLACE FUNCTION timers._sql_refusal_rules(p_autonomous boolean)
RETURNS TABLE (n integer, words text[], pattern text, statement text, reason text, hint text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    WITH why (key, reason) AS (VALUES
        ('database', 'a timer works inside its own database'),
        ('identity', 'a timer runs as the role that saved it'),
        ('roles', 'a timer runs as the role that saved it and cannot manage roles'),
        ('transaction',
         'a run is one transaction, committed together with the run''s bookkeeping, so the SQL'
         ' cannot end it or start another (a procedure that commits cannot do it either: the SQL'
         ' runs inside a function); to split work, use several timers'),
        ('savepoint',
         'a run is one transaction and its SQL runs inside a function; to undo part of the work'
         ' on an error, use a DO block with BEGIN ... EXCEPTION'),
        ('no_block', 'it cannot run inside a transaction block, and a run is one transaction'),
        -- an autonomous timer's SQL is not one transaction: these say why without that
        ('prepared_autonomous',
         'prepared transactions are for transaction managers: one outlives its session and holds'
         ' its locks until someone commits or rolls it back'),
        ('hold_autonomous',
         'a holdable cursor would outlive the statement in the session that runs the SQL;'
         ' fetch what you need in one statement, or use a function'),
        ('tablespace_autonomous', 'tablespaces belong to the whole server'))
    SELECT r.n, r.words, r.pattern, r.statement,
           CASE WHEN p_autonomous AND a.reason IS NOT NULL THEN a.reason
                ELSE coalesce(w.reason OPERATOR(pg_catalog.||) coalesce(r.more, ''), r.more)
                     -- said in the message too: the HTTP API passes on the message alone
                     OPERATOR(pg_catalog.||) CASE WHEN h.hinted THEN '; or save the timer with autonomous => true'
                                                  ELSE '' END END,
           CASE WHEN h.hinted
                THEN 'With autonomous => true its SQL runs as its owner, statement by statement,'
                     ' outside a transaction block (docs/running.md, "Autonomous timers").' END
      FROM (VALUES
        (1, ARRAY['CREATE', 'DROP', 'ALTER'], '(CREATE|DROP|ALTER) DATABASE\M', '\1 DATABASE', 'database', NULL),
        (2, ARRAY['ALTER'], 'ALTER SYSTEM\M', 'ALTER SYSTEM', NULL,
            'it changes the whole server''s configuration; a timer works inside its own database'),
        (3, ARRAY['CREATE', 'DROP', 'ALTER'], '(CREATE|DROP|ALTER) (ROLE|GROUP)\M', '\1 \2', 'roles', NULL),
        (4, ARRAY['CREATE', 'DROP', 'ALTER'], '(CREATE|DROP|ALTER) USER\M(?! MAPPING\M)', '\1 USER', 'roles', NULL),
        (5, ARRAY['CREATE', 'DROP'], '(CREATE|DROP) TABLESPACE\M', '\1 TABLESPACE', NULL,
            'tablespaces belong to the whole server, and it cannot run inside a transaction block, and a run is one transaction'),
        (6, ARRAY['CREATE', 'DROP'], '(CREATE|DROP) INDEX CONCURRENTLY\M', '\1 INDEX CONCURRENTLY', 'no_block', NULL),
        (7, ARRAY['CREATE'], 'CREATE UNIQUE INDEX CONCURRENTLY\M', 'CREATE INDEX CONCURRENTLY', 'no_block', NULL),
        (8, ARRAY['ALTER'], 'ALTER TABLE\M.* DETACH PARTITION\M.* CONCURRENTLY\M', 'DETACH PARTITION ... CONCURRENTLY',
            'no_block', NULL),
        (9, ARRAY['GRANT', 'REVOKE'], '(GRANT|REVOKE)$', '\1 of a role', 'roles', NULL),
        (10, ARRAY['SET', 'RESET'], '(SET|RESET) ROLE\M', '\1 ROLE', 'identity', NULL),
        (11, ARRAY['SET', 'RESET'], '(SET|RESET) (SESSION_AUTHORIZATION|SESSION AUTHORIZATION)\M', '\1 SESSION AUTHORIZATION',
             'identity', NULL),
        (12, ARRAY['SET'], 'SET SESSION CHARACTERISTICS\M', 'SET SESSION CHARACTERISTICS', NULL,
             'it would change the runner''s session beyond this run; use SET TRANSACTION'),
        (13, ARRAY['RESET'], 'RESET ALL\M', 'RESET ALL', NULL,
             'it would also reset the run''s own settings (pgtimers.timer, pgtimers.due_at); reset settings one by one'),
        (14, ARRAY['DISCARD'], 'DISCARD\M', 'DISCARD', NULL,
             'it would throw away the state of the runner''s session, which outlives the run'),
        (15, ARRAY['COMMIT'], 'COMMIT PREPARED\M', 'COMMIT PREPARED', 'transaction', NULL),
        (16, ARRAY['BEGIN', 'COMMIT', 'END', 'ABORT'], '(BEGIN|COMMIT|END|ABORT)\M', '\1', 'transaction', NULL),
        (17, ARRAY['ROLLBACK'], 'ROLLBACK PREPARED\M', 'ROLLBACK PREPARED', 'transaction', NULL),
        (18, ARRAY['ROLLBACK'], 'ROLLBACK( WORK| TRANSACTION)? TO\M', 'ROLLBACK TO SAVEPOINT', 'savepoint', NULL),
        (19, ARRAY['ROLLBACK'], 'ROLLBACK\M', 'ROLLBACK', 'transaction', NULL),
        (20, ARRAY['START'], 'START TRANSACTION\M', 'START TRANSACTION', 'transaction', NULL),
        (21, ARRAY['PREPARE'], 'PREPARE TRANSACTION\M', 'PREPARE TRANSACTION', 'transaction', NULL),
        -- a prepared statement would outlive the run on the runner's shared session
        (22, ARRAY['PREPARE'], 'PREPARE\M', 'PREPARE', NULL,
             'a prepared statement would outlive the run in the runner''s session, and could'
             ' take the name of one the runner executes next; run the statement directly,'
             ' or use a function'),
        (23, ARRAY['SAVEPOINT'], 'SAVEPOINT\M', 'SAVEPOINT', 'savepoint', NULL),
        (24, ARRAY['RELEASE'], 'RELEASE\M', 'RELEASE SAVEPOINT', 'savepoint', NULL),
        (25, ARRAY['DEALLOCATE'], 'DEALLOCATE\M', 'DEALLOCATE', NULL,
             'it would drop prepared statements of the runner''s session, which outlives the run'
             ' (a timer cannot PREPARE its own)'),
        (26, ARRAY['EXECUTE'], 'EXECUTE\M', 'EXECUTE', NULL,
             'it would run a prepared statement of the runner''s session (a timer cannot PREPARE'
             ' its own); run the statement directly, or use a function'),
        (27, ARRAY['DECLARE'], 'DECLARE( (?!FOR )\S+)* WITH HOLD\M', 'DECLARE ... WITH HOLD', NULL,
             'a holdable cursor''s query runs at COMMIT, after the SQL has returned, as the'
             ' runner rather than the timer''s owner; declare the cursor without WITH HOLD'),
        (28, ARRAY['VACUUM'], 'VACUUM\M', 'VACUUM', 'no_block', ' (ANALYZE can)'),
        (29, ARRAY['REINDEX'], 'REINDEX \S+ CONCURRENTLY\M', 'REINDEX CONCURRENTLY', 'no_block', NULL),
        (30, ARRAY['REINDEX'], 'REINDEX (SCHEMA|DATABASE|SYSTEM)\M', 'REINDEX \1', 'no_block',
             ' (REINDEX TABLE and REINDEX INDEX can)'),
        (31, ARRAY['CLUSTER'], 'CLUSTER( VERBOSE)?$', 'CLUSTER without a table', 'no_block', ' (CLUSTER of one table can)'),
        (32, ARRAY['LISTEN', 'UNLISTEN'], '(LISTEN|UNLISTEN)\M', '\1', NULL,
             'a run''s session does not receive notifications; NOTIFY and pg_notify() do work'),
        (33, ARRAY['LOAD'], 'LOAD\M', 'LOAD', NULL,
             'it loads a library into the runner''s server process; a timer works inside its own database'),
        (34, ARRAY['COPY'], 'COPY (TO|FROM) PROGRAM\M', 'COPY ... PROGRAM', NULL,
             'it runs a program on the database server; a timer works inside its own database'),
        (35, ARRAY['COPY'], 'COPY (TO|FROM) (STDIN|STDOUT)\M', 'COPY ... \2', NULL,
             'a timer has no client to copy from or to; use INSERT ... SELECT'),
        (36, ARRAY['COPY'], 'COPY\M', 'COPY ... a file', NULL,
             'it reads or writes a file on the database server; a timer works inside its own database'),
        (37, ARRAY['SET', 'RESET'],
             '(SET|RESET) (EXIT_ON_ERROR|IDLE_SESSION_TIMEOUT|IDLE_IN_TRANSACTION_SESSION_TIMEOUT|TRANSACTION_TIMEOUT|SESSION_REPLICATION_ROLE)\M',
             '\1 \2', NULL,
             'it would end the runner''s session (an error with exit_on_error, a timeout) or change'
             ' how the run''s bookkeeping is written (session_replication_role); a run''s time limit'
             ' is its timer''s timeout')
      ) AS r (n, words, pattern, statement, why, more)
      -- one_transaction: the rule exists only because a run is one transaction (not the
      -- prepared transactions 15, 17 and 21: they outlive the session); lifted for an
      -- autonomous timer, hinted at for the others. shared_session: the rule exists only
      -- because the runner's session outlives the run (12, 13, 14, 22, 25, 26, 32, 37);
      -- lifted for an autonomous timer, whose session is its owner's, made for the run and
      -- closed after it
      CROSS JOIN LATERAL (SELECT coalesce(r.why OPERATOR(pg_catalog.=) ANY (ARRAY['transaction', 'savepoint', 'no_block']), false)
                                 AND NOT r.n OPERATOR(pg_catalog.=) ANY (ARRAY[15, 17, 21]) AS one_transaction,
                                 r.n OPERATOR(pg_catalog.=) ANY (ARRAY[12, 13, 14, 22, 25, 26, 32, 37]) AS shared_session) m
      CROSS JOIN LATERAL (SELECT m.one_transaction AND NOT p_autonomous AS hinted) h
      LEFT JOIN why w ON w.key OPERATOR(pg_catalog.=) r.why
      LEFT JOIN (VALUES (5, 'tablespace_autonomous'), (15, 'prepared_autonomous'), (17, 'prepared_autonomous'),
                        (21, 'prepared_autonomous'), (27, 'hold_autonomous')) x (n, key)
             ON x.n OPERATOR(pg_catalog.=) r.n
      LEFT JOIN why a ON a.key OPERATOR(pg_catalog.=) x.key
     WHERE NOT (p_autonomous AND (m.one_transaction OR m.shared_session))
$fn$;

-- Why a statement is refused, from its head (see _sql_statements): statement (its
-- name in messages), reason and hint (NULL or how to do it all the same), all NULL when
-- it is allowed. p_autonomous: for an autonomous timer, which is refused less (see
-- _sql_refusal_rules).
--
-- Refused: statements that leave the database (CREATE/ALTER/DROP DATABASE, ALTER
-- SYSTEM, CREATE/DROP TABLESPACE, COPY to or from files, programs or the client,
-- LOAD), the owner's identity (role statements, GRANT/REVOKE of roles, SET/RESET
-- ROLE, SET/RESET SESSION AUTHORIZATION), the run's transaction (transaction
-- control, savepoints) or the runner's session (SET SESSION CHARACTERISTICS,
-- RESET ALL, DISCARD, LISTEN/UNLISTEN, PREPARE/DEALLOCATE/EXECUTE: prepared
-- statements share one namespace with the driver's; DECLARE ... WITH HOLD: the
-- cursor's query runs at COMMIT, outside the executor), and statements PostgreSQL
-- cannot run inside a transaction (VACUUM, ... CONCURRENTLY, REINDEX
-- SCHEMA/DATABASE/SYSTEM, CLUSTER of every table).
-- Allowed on purpose: plain SET/RESET of other settings (search_path, work_mem, ...),
-- CHECKPOINT (permission-checked by PostgreSQL: superusers and pg_checkpoint), ANALYZE,
-- REFRESH MATERIALIZED VIEW CONCURRENTLY, REASSIGN/DROP OWNED (permission-checked),
-- CREATE/ALTER/DROP USER MAPPING, DECLARE without HOLD, NOTIFY, CALL, DO (its body is
-- read by _sql_scan).
CREATE OR REPLACE FUNCTION timers._sql_refusal(head text[], has_on boolean, p_autonomous boolean,
                                               OUT statement text, OUT reason text, OUT hint text)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    v_head constant text := timers._sql_refusal_head(head, has_on);
    r record;
BEGIN
    FOR r IN SELECT x.pattern, x.statement, x.reason, x.hint FROM timers._sql_refusal_rules(p_autonomous) x
              WHERE split_part(v_head, ' ', 1) = ANY (x.words) ORDER BY x.n LOOP
        IF v_head ~ ('^' || r.pattern) THEN
            statement := regexp_replace(v_head, '^' || r.pattern || '.*$', r.statement);
            reason := r.reason;
            hint := r.hint;
            RETURN;
        END IF;
    END LOOP;
END
$fn$;

-- The first statement of a text that wants an autonomous timer, else NULL: one that
-- cannot run in a transaction block or ends the transaction (what _sql_refusal refuses
-- atomic timers with a hint at autonomous => true), VACUUM, CLUSTER, REFRESH MATERIALIZED
-- VIEW CONCURRENTLY, or CALL (a procedure may COMMIT). For the import of pg_cron's jobs,
-- which pg_cron runs outside a transaction block.
CREATE OR REPLACE FUNCTION timers._sql_wants_autonomy(sql text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    s record;
    refusal record;
    code text;
BEGIN
    IF sql IS NULL THEN
        RETURN NULL;
    END IF;
    FOR s IN SELECT * FROM timers._sql_statements(sql) ORDER BY n LOOP
        IF s.head[1] IN ('VACUUM', 'CLUSTER', 'CALL') THEN
            RETURN s.head[1];
        ELSIF s.head[1] = 'REFRESH' THEN
            code := coalesce(code, timers._sql_code(sql));
            IF upper(substr(code, s.pos, 200)) ~ '^REFRESH\s+MATERIALIZED\s+VIEW\s+CONCURRENTLY\M' THEN
                RETURN 'REFRESH MATERIALIZED VIEW CONCURRENTLY';
            END IF;
        ELSE
            refusal := timers._sql_refusal(s.head, s.has_on, false);
            IF refusal.hint IS NOT NULL THEN
                RETURN refusal.statement;
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END
$fn$;

-- 'line L, column C' of a character position (1-based; columns count characters).
CREATE OR REPLACE FUNCTION timers._sql_line_col(sql text, pos integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    before constant text := left(sql, pos - 1);
    last_nl constant integer := strpos(reverse(before), E'\n');
BEGIN
    RETURN format('line %s, column %s',
                  1 + length(before) - length(replace(before, E'\n', '')),
                  CASE WHEN last_nl = 0 THEN pos ELSE last_nl END);
END
$fn$;

-- NULL when PostgreSQL's raw parser accepts the SQL, else its error message.
-- The trick: the body of a SQL-language function with a polymorphic argument is
-- run through the raw parser when the function is created, but not analyzed (the
-- argument's type is unknown), so tables and routines it names need not exist.
-- The function is dropped at once; nothing of it stays.
CREATE OR REPLACE FUNCTION timers._sql_parse_error(sql text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET check_function_bodies = on
SET client_min_messages = warning
AS $fn$
DECLARE
    probe constant text := 'pgtimers_sqlcheck_probe';
    create_probe constant text :=
        'CREATE FUNCTION pg_temp.' || quote_ident(probe) || '(anyelement) RETURNS void LANGUAGE sql AS ';
    drop_probe constant text := 'DROP FUNCTION pg_temp.' || quote_ident(probe) || '(anyelement)';
    msg text;
    state text;
BEGIN
    IF pg_catalog.pg_my_temp_schema() = 0 THEN
        -- The session's temporary schema is made here, outside the probe's
        -- subtransaction: made inside it, it would be made and rolled back on every
        -- call, and each time the server drops every cached plan of the session.
        EXECUTE create_probe || quote_literal('SELECT 1');
        EXECUTE drop_probe;
    END IF;
    BEGIN
        -- quote_literal, never a dollar quote: the SQL may contain any tag. The probe
        -- is never kept: the sentinel rolls its creation back (cheaper than a DROP).
        EXECUTE create_probe || quote_literal(sql);
        RAISE EXCEPTION USING ERRCODE = 'PT002', MESSAGE = 'parsed';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
    END;
    IF state = 'PT002' THEN
        RETURN NULL;
    END IF;
    IF state <> '42601' THEN
        -- Not a syntax error: make sure the SQL is the cause, not the probe itself
        -- (no TEMP privilege, read-only transaction, ...): those errors come through.
        EXECUTE create_probe || quote_literal('SELECT 1');
        EXECUTE drop_probe;
    END IF;
    RETURN msg;
END
$fn$;

-- The character position a parse error of the SQL points at, or NULL.
-- PL/pgSQL cannot read an error's position, so it is found again by parsing
-- prefixes of the SQL: a prefix that stops before the error parses, or fails only
-- "at end of input"; one that goes past it fails with the same message. So a
-- binary search finds the first statement whose end is past the error, then, in
-- that statement alone (statements parse independently), the first token past it:
-- for "at or near "X"" only the tokens spelled X. "at end of input" is after the
-- last token.
CREATE OR REPLACE FUNCTION timers._sql_error_position(sql text, message text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $fn$
DECLARE
    blank constant text := E' \t\n\r\f\x0b';
    near constant integer := strpos(message, ' at or near "');
    x text;
    stmts integer[];
    base integer := 0;   -- the statement searched starts after this position
    part text;
    cand integer[];
    ends integer[];
    lo integer;
    hi integer;
    mid integer;
BEGIN
    IF sql IS NULL OR message IS NULL THEN
        RETURN NULL;
    END IF;
    IF message LIKE '% at end of input' THEN
        SELECT max(k.pos + length(rtrim(k.tok, blank))) INTO lo
          FROM timers._sql_tokens(sql, true) AS k
         WHERE k.kind <> 't' AND rtrim(k.tok, blank) <> '';
        RETURN coalesce(lo, length(sql) + 1);
    END IF;
    IF near > 0 AND right(message, 1) = '"' THEN
        x := substr(message, near + 13, length(message) - near - 13);
    END IF;

    -- the statement
    SELECT array_agg(s.pos ORDER BY s.n) INTO stmts FROM timers._sql_statements(sql) AS s;
    part := sql;
    IF cardinality(stmts) > 1 THEN
        stmts := stmts[2:] || (length(sql) + 1);   -- where each one ends (exclusive)
        lo := 1;
        hi := cardinality(stmts);
        WHILE lo < hi LOOP
            mid := (lo + hi) / 2;
            IF timers._sql_parse_error(left(sql, stmts[mid] - 1)) IS NOT DISTINCT FROM message THEN
                hi := mid;
            ELSE
                lo := mid + 1;
            END IF;
        END LOOP;
        IF lo > 1 THEN
            base := stmts[lo - 1] - 1;
        END IF;
        part := substr(sql, base + 1, stmts[lo] - 1 - base);
        IF timers._sql_parse_error(part) IS DISTINCT FROM message THEN
            -- it does not fail alone as it does in the SQL: search the whole SQL
            base := 0;
            part := sql;
        END IF;
    END IF;

    -- the token
    IF x IS NOT NULL THEN
        SELECT array_agg(k.pos ORDER BY k.n), array_agg(k.pos + length(x) - 1 ORDER BY k.n)
          INTO cand, ends
          FROM timers._sql_tokens(part) AS k
         WHERE (starts_with(k.tok, x) OR starts_with(x, k.tok))
           AND substr(part, k.pos, length(x)) = x
           -- not a word that only begins with it (SELECT for SELEC)
           AND NOT (length(k.tok) > length(x)
                    AND substr(k.tok, length(x), 2) ~ '^(?:[A-Za-z0-9_$]|[^\x01-\x7f]){2}$');
        IF cand IS NULL THEN
            lo := strpos(part, x);
            RETURN CASE WHEN lo > 0 THEN base + lo END;
        END IF;
    ELSE
        SELECT array_agg(k.pos ORDER BY k.n), array_agg(k.pos + length(k.tok) - 1 ORDER BY k.n)
          INTO cand, ends
          FROM timers._sql_tokens(part) AS k
         WHERE k.kind <> 't';
        IF cand IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    lo := 1;
    hi := cardinality(cand);
    WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF timers._sql_parse_error(left(part, ends[mid])) IS NOT DISTINCT FROM message THEN
            hi := mid;
        ELSE
            lo := mid + 1;
        END IF;
    END LOOP;
    RETURN base + cand[lo];
END
$fn$;

-- A timer's name: 1 to 64 of ASCII letters, digits, "_" and "-". Returns it unchanged.
CREATE OR REPLACE FUNCTION timers._check_name(name text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF name ~ '^[A-Za-z0-9_-]{1,64}$' THEN
        RETURN name;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('bad timer name %s%s: use 1 to 64 letters, digits, "_" and "-"',
                         timers._quoted(name),
                         CASE WHEN length(name) > 64 THEN format(' (%s characters)', length(name)) END);
END
$fn$;

-- A timer's SQL: not empty, at most 64 KB, parses, and uses no refused statement.
-- autonomous: the SQL is an autonomous timer's, which is refused less (see
-- _sql_refusal_rules).
CREATE OR REPLACE FUNCTION timers._check_sql(sql text, autonomous boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    max_bytes constant integer := 65536;
    refusable constant text[] := timers._sql_refused_words();
    msg text;
    near integer;
    x text;
    p integer;
    s record;
    refusal record;
    deep record;
    found_any boolean := false;
BEGIN
    IF sql IS NULL THEN
        RAISE EXCEPTION 'the timer''s SQL is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(sql) > max_bytes THEN
        RAISE EXCEPTION 'the timer''s SQL is % bytes; the limit is % (64 KB)', octet_length(sql), max_bytes
            USING ERRCODE = 'program_limit_exceeded';
    END IF;

    sql := sql || '';   -- decompress once, not in every function it is passed to
    msg := timers._sql_parse_error(sql);
    IF msg IS NOT NULL THEN
        -- A backslash outside strings is never SQL: most likely a psql meta-command.
        p := CASE WHEN strpos(sql, '\') > 0 THEN strpos(timers._sql_code(sql), '\') ELSE 0 END;
        IF p > 0 THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: psql meta-commands like \c do not work in a timer (%)',
                (regexp_match(substr(sql, p, 40), '^\\(?:[A-Za-z]+|[^[:space:]])?'))[1],
                timers._sql_line_col(sql, p)
                USING ERRCODE = 'syntax_error';
        END IF;
        p := timers._sql_error_position(sql, msg);
        -- the token in "at or near" can be the whole rest of the SQL: shorten it
        near := strpos(msg, ' at or near "');
        IF near > 0 AND right(msg, 1) = '"' THEN
            x := substr(msg, near + 13, length(msg) - near - 13);
            IF length(x) > 40 THEN
                msg := left(msg, near + 12) || left(x, 40) || '…"';
            END IF;
        END IF;
        RAISE EXCEPTION USING
            ERRCODE = 'syntax_error',
            MESSAGE = format('the timer''s SQL does not parse: %s%s', msg,
                             ' (' || timers._sql_line_col(sql, p) || ')');
    END IF;

    -- One statement (no ';' but maybe a last one) whose first word no rule refuses: nothing
    -- to look for in its statements, and reading them costs more than the rest of a save.
    IF sql ~ '^[ \t\n\r\f\v]*[A-Za-z_][^;]*;?[ \t\n\r\f\v]*$'
       AND NOT (upper(substring(sql FROM '^[ \t\n\r\f\v]*([A-Za-z_]+)')) = ANY (refusable)) THEN
        found_any := true;
    ELSE
        FOR s IN SELECT * FROM timers._sql_statements(sql) LOOP
            found_any := true;
            CONTINUE WHEN NOT (s.head[1] = ANY (refusable));
            refusal := timers._sql_refusal(s.head, s.has_on, coalesce(_check_sql.autonomous, false));
            IF refusal.statement IS NOT NULL AND refusal.hint IS NOT NULL THEN
                RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                    refusal.statement, refusal.reason, timers._sql_line_col(sql, s.pos)
                    USING ERRCODE = 'insufficient_privilege', HINT = refusal.hint;
            ELSIF refusal.statement IS NOT NULL THEN
                RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                    refusal.statement, refusal.reason, timers._sql_line_col(sql, s.pos)
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END LOOP;
    END IF;
    IF NOT found_any THEN
        RAISE EXCEPTION 'the timer''s SQL is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- dblink calls anywhere, and what DO blocks and routine bodies hold. Only text
    -- that can hold one of them is read again: a call names dblink (or is a
    -- U&"..." name), a body follows DO, FUNCTION or PROCEDURE (keywords cannot be
    -- escaped).
    IF sql ~* 'dblink|u&|\m(do|function|procedure)\M' THEN
        deep := timers._sql_scan(sql, false, p_autonomous => coalesce(_check_sql.autonomous, false));
        IF deep.statement IS NOT NULL THEN
            RAISE EXCEPTION 'the timer''s SQL may not use %: % (%)',
                deep.statement, deep.reason, timers._sql_line_col(sql, deep.pos)
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
END
$fn$;

-- The value of one string constant, given as the tokens of _sql_tokens that make
-- it up: a '..', E'..' or $tag$..$tag$ token, and the '..' tokens that continue a
-- quoted one on the next lines (they follow the first one's escape rules). With
-- p_unicode, the tokens are of U&'..' (p_escape: its UESCAPE character, default
-- '\'). NULL when they are not a string constant PostgreSQL would read.
-- E'..' and U&'..' are read by PostgreSQL itself, from a literal rebuilt here and
-- checked to be exactly one string constant.
CREATE OR REPLACE FUNCTION timers._sql_string_value(parts text[], p_unicode boolean DEFAULT false,
                                                    p_escape text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
SET standard_conforming_strings = on
AS $fn$
DECLARE
    v_first constant text := parts[1];
    v_tag text;
    v_inner text := '';
    v_literal text;
    v_value text;
    v_part text;
    i integer;
BEGIN
    IF v_first IS NULL THEN
        RETURN NULL;
    END IF;
    IF starts_with(v_first, '$') THEN
        -- a dollar quote is never continued
        v_tag := substring(v_first FROM '^\$[^$]*\$');
        IF v_tag IS NULL OR length(v_first) < 2 * length(v_tag) OR right(v_first, length(v_tag)) <> v_tag THEN
            RETURN NULL;
        END IF;
        RETURN substr(v_first, length(v_tag) + 1, length(v_first) - 2 * length(v_tag));
    END IF;
    FOR i IN 1 .. cardinality(parts) LOOP
        v_part := parts[i];
        IF i = 1 AND v_first ~ '^[Ee]''' THEN
            v_part := substr(v_part, 2);
        END IF;
        IF v_part !~ '^''[\s\S]*''$' OR length(v_part) < 2 THEN
            RETURN NULL;
        END IF;
        v_inner := v_inner || substr(v_part, 2, length(v_part) - 2);
    END LOOP;
    IF v_first ~ '^[Ee]''' THEN
        v_literal := 'E''' || v_inner || '''';
        IF v_literal !~ '^E''(?:[^''\\]|''''|\\[\s\S])*''$' THEN
            RETURN NULL;
        END IF;
    ELSIF p_unicode THEN
        p_escape := coalesce(p_escape, '\');
        IF v_inner !~ '^(?:[^'']|'''')*$' OR p_escape !~ '^[^0-9A-Fa-f+''"[:space:]]$' THEN
            RETURN NULL;
        END IF;
        v_literal := 'U&''' || v_inner || ''' UESCAPE ''' || p_escape || '''';
    ELSE
        IF v_inner !~ '^(?:[^'']|'''')*$' THEN
            RETURN NULL;
        END IF;
        RETURN replace(v_inner, '''''', '''');
    END IF;
    BEGIN
        EXECUTE 'SELECT ' || v_literal INTO v_value;
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
    RETURN v_value;
END
$fn$;

-- What the SQL check refuses beyond statement heads, found by reading the tokens
-- of a text (_sql_tokens): statement (its name in messages), reason, and pos (the
-- character position in the text), all NULL when nothing is refused.
--
--   * PREPARE and DEALLOCATE statements, and at the top level EXECUTE of a
--     prepared statement: a prepared statement lives in the runner's session,
--     which outlives the run and also runs the runner's own statements. Inside a
--     body (p_context: 'a DO block' or 'the body of a routine') a statement
--     starts at the start, after ';' or after BEGIN, THEN, ELSE and LOOP; its
--     EXECUTE is PL/pgSQL's dynamic SQL, not refused.
--   * Unless p_session_only: a call of dblink(), dblink_exec(), dblink_connect(),
--     dblink_connect_u(), dblink_send_query() or dblink_open(), plain, quoted,
--     U&"..." or schema-qualified: it connects to a server as the role of its
--     connection string, not as the timer's owner.
--   * The bodies of DO blocks and of CREATE [OR REPLACE] FUNCTION/PROCEDURE ... AS
--     '...' are read the same way, p_depth levels deep; a body that cannot be read,
--     or one nested deeper, is refused.
-- Known limit: the text of dynamic SQL (EXECUTE 'PREPARE ...' in PL/pgSQL, or a
-- function that exists already) is not read here; timers._exec_as refuses its
-- prepared statements after the run.
CREATE OR REPLACE FUNCTION timers._sql_scan(p_text text, p_session_only boolean,
                                            p_context text DEFAULT NULL, p_depth integer DEFAULT 4,
                                            p_autonomous boolean DEFAULT false,
                                            OUT statement text, OUT reason text, OUT pos integer)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    dblinks constant text[] := ARRAY['dblink', 'dblink_exec', 'dblink_connect', 'dblink_connect_u',
                                     'dblink_send_query', 'dblink_open'];
    -- a name after these words is a table or a routine being defined, not a call
    not_calls constant text[] := ARRAY['TABLE', 'INTO', 'EXISTS', 'REFERENCES', 'VIEW', 'COPY',
                                       'FUNCTION', 'PROCEDURE', 'ROUTINE'];
    r_unread constant text :=
        'its body could not be read for the check; write it as one dollar-quoted string ($$ ... $$)';
    toks text[];
    kinds text[];
    poss integer[];
    cand integer[];
    i integer;
    j integer;
    b integer;
    w text;
    w2 text;
    nm text;
    esc text;
    uni boolean;
    at_start boolean;
    lvl integer;
    body_at integer;      -- index of the first token of a body's string constant
    body_ctx text;
    body_what text;       -- the statement that has the body, in messages
    parts text[];
    body text;
    tag text;
    sub record;
    r record;
BEGIN
    IF p_text IS NULL OR p_text = '' THEN
        RETURN;
    END IF;
    SELECT array_agg(x.tok ORDER BY x.n), array_agg(x.kind ORDER BY x.n), array_agg(x.pos ORDER BY x.n)
      INTO toks, kinds, poss
      FROM timers._sql_tokens(p_text) AS x
     WHERE x.kind <> 't';
    -- the tokens worth a look, found set-wise: a loop over every token of 64 KB is slow
    SELECT array_agg(c.i ORDER BY c.i) INTO cand
      FROM (SELECT u.i::integer AS i, u.t, u.k, lag(u.t) OVER (ORDER BY u.i) AS p
              FROM unnest(toks, kinds) WITH ORDINALITY AS u(t, k, i)) c
     WHERE (c.k = 'w' AND upper(c.t) IN ('PREPARE', 'DEALLOCATE', 'EXECUTE', 'DO', 'CREATE'))
        OR (NOT p_session_only AND c.k = 'w' AND lower(c.t) = ANY (dblinks))
        OR (NOT p_session_only AND c.k = 'q' AND (c.t LIKE '%dblink%' OR c.p = '&'));

    FOREACH i IN ARRAY coalesce(cand, '{}'::integer[]) LOOP
        w := CASE WHEN kinds[i] = 'w' THEN upper(toks[i]) END;
        at_start := i = 1 OR toks[i - 1] = ';'
                    OR (p_context IS NOT NULL AND kinds[i - 1] = 'w'
                        AND upper(toks[i - 1]) IN ('BEGIN', 'THEN', 'ELSE', 'LOOP'));
        body_at := NULL;

        IF at_start AND w IN ('PREPARE', 'DEALLOCATE', 'EXECUTE') THEN
            w2 := CASE WHEN kinds[i + 1] = 'w' THEN upper(toks[i + 1]) END;
            -- PL/pgSQL's EXECUTE runs a string; PREPARE TRANSACTION is transaction control,
            -- which PostgreSQL refuses in a run by itself; an autonomous timer's session is
            -- its owner's, made for the run
            CONTINUE WHEN w = 'EXECUTE' AND p_context IS NOT NULL;
            CONTINUE WHEN w = 'PREPARE' AND w2 = 'TRANSACTION';
            CONTINUE WHEN p_autonomous;
            r := timers._sql_refusal(ARRAY[w, w2], false, false);
            statement := r.statement || coalesce(' in ' || p_context, '');
            reason := r.reason;
            pos := poss[i];
            RETURN;
        ELSIF at_start AND w = 'DO' THEN
            -- DO [LANGUAGE lang] body [LANGUAGE lang]
            j := i + 1;
            WHILE j <= cardinality(toks) AND toks[j] <> ';' LOOP
                IF kinds[j] = 's' AND NOT (kinds[j - 1] = 'w' AND upper(toks[j - 1]) IN ('LANGUAGE', 'UESCAPE')) THEN
                    body_at := j;
                    EXIT;
                END IF;
                j := j + 1;
            END LOOP;
            body_ctx := 'a DO block';
            body_what := 'DO';
        ELSIF at_start AND w = 'CREATE' THEN
            j := i + 1;
            IF upper(toks[j]) = 'OR' AND upper(toks[j + 1]) = 'REPLACE' THEN
                j := j + 2;
            END IF;
            IF kinds[j] = 'w' AND upper(toks[j]) IN ('FUNCTION', 'PROCEDURE') THEN
                body_what := 'CREATE ' || upper(toks[j]);
                -- the string after AS, outside parentheses
                lvl := 0;
                j := j + 1;
                WHILE j <= cardinality(toks) AND NOT (toks[j] = ';' AND lvl = 0) LOOP
                    IF toks[j] = '(' THEN
                        lvl := lvl + 1;
                    ELSIF toks[j] = ')' THEN
                        lvl := lvl - 1;
                    ELSIF lvl = 0 AND kinds[j] = 'w' AND upper(toks[j]) = 'AS' THEN
                        b := j + 1;
                        IF kinds[b] = 'w' AND upper(toks[b]) = 'U' AND toks[b + 1] = '&' THEN
                            b := b + 2;
                        END IF;
                        IF kinds[b] = 's' THEN
                            body_at := b;
                            EXIT;
                        END IF;
                    END IF;
                    j := j + 1;
                END LOOP;
            END IF;
            body_ctx := 'the body of a routine';
        ELSIF NOT p_session_only AND kinds[i] IN ('w', 'q') THEN
            -- a call of one of dblink's connecting functions: its name, then '('
            j := i + 1;
            uni := kinds[i] = 'q' AND i > 2 AND toks[i - 1] = '&' AND kinds[i - 2] = 'w'
                   AND upper(toks[i - 2]) = 'U' AND poss[i - 1] = poss[i - 2] + 1 AND poss[i] = poss[i - 1] + 1;
            IF kinds[i] = 'w' THEN
                nm := lower(toks[i]);
            ELSE
                nm := replace(substr(toks[i], 2, length(toks[i]) - 2), '""', '"');
                IF uni THEN
                    esc := NULL;
                    IF kinds[j] = 'w' AND upper(toks[j]) = 'UESCAPE' AND kinds[j + 1] = 's' THEN
                        esc := timers._sql_string_value(ARRAY[toks[j + 1]]);
                        j := j + 2;
                    END IF;
                    nm := timers._sql_string_value(ARRAY['''' || replace(nm, '''', '''''') || ''''], true, esc);
                END IF;
            END IF;
            IF nm = ANY (dblinks) AND toks[j] = '(' THEN
                -- the word before the (schema-qualified) name
                b := i - CASE WHEN uni THEN 3 ELSE 1 END;
                WHILE b > 1 AND toks[b] = '.' AND kinds[b - 1] IN ('w', 'q') LOOP
                    b := b - 2;
                END LOOP;
                IF b < 1 OR kinds[b] <> 'w' OR NOT upper(toks[b]) = ANY (not_calls) THEN
                    statement := nm || '()' || coalesce(' in ' || p_context, '');
                    reason := 'it connects to a database server as the role of its connection string, not as'
                              ' the timer''s owner; a timer works inside its own database';
                    pos := poss[i];
                    RETURN;
                END IF;
            END IF;
        END IF;

        CONTINUE WHEN body_at IS NULL;
        -- the body: its string constant (continued on the next lines, or U&'..' UESCAPE 'c')
        uni := body_at > 2 AND toks[body_at - 1] = '&' AND kinds[body_at - 2] = 'w'
               AND upper(toks[body_at - 2]) = 'U' AND poss[body_at - 1] = poss[body_at - 2] + 1
               AND poss[body_at] = poss[body_at - 1] + 1;
        parts := ARRAY[toks[body_at]];
        j := body_at + 1;
        WHILE kinds[j] = 's' AND starts_with(toks[j], '''') AND NOT starts_with(toks[body_at], '$') LOOP
            parts := parts || toks[j];
            j := j + 1;
        END LOOP;
        esc := NULL;
        IF uni AND kinds[j] = 'w' AND upper(toks[j]) = 'UESCAPE' AND kinds[j + 1] = 's' THEN
            esc := timers._sql_string_value(ARRAY[toks[j + 1]]);
        END IF;
        body := timers._sql_string_value(parts, uni, esc);
        IF body IS NULL OR p_depth <= 0 THEN
            statement := body_what || coalesce(' in ' || p_context, '');
            reason := CASE WHEN body IS NULL THEN r_unread
                           ELSE 'DO blocks and routines nested this deep are not read for the check' END;
            pos := poss[body_at];
            RETURN;
        END IF;
        sub := timers._sql_scan(body, p_session_only, body_ctx, p_depth - 1, p_autonomous);
        IF sub.statement IS NOT NULL THEN
            statement := sub.statement;
            reason := sub.reason;
            -- the position in this text: exact in a dollar quote, else the string's start
            tag := substring(toks[body_at] FROM '^\$[^$]*\$');
            pos := CASE WHEN tag IS NOT NULL THEN poss[body_at] + length(tag) + sub.pos - 1
                        ELSE poss[body_at] END;
            RETURN;
        END IF;
    END LOOP;
END
$fn$;

-- ---------------------------------------------------------------------------
-- Rights
-- ---------------------------------------------------------------------------
REVOKE ALL ON FUNCTION
    timers._first_at_least(integer[],integer,integer),
    timers._sql_refusal_rules(boolean),
    timers._sql_refusal_head(text[],boolean),
    timers._sql_lex_pattern(boolean),
    timers._sql_dollar_delimiters(text),
    timers._sql_comment_delimiters(text),
    timers._sql_tokens(text,boolean),
    timers._sql_refused_words(),
    timers._sql_code(text),
    timers._sql_continued(bigint[],boolean[],text[]),
    timers._sql_statements(text),
    timers._sql_refusal(text[],boolean,boolean),
    timers._sql_line_col(text,integer),
    timers._sql_parse_error(text),
    timers._sql_error_position(text,text),
    timers._check_name(text),
    timers._check_sql(text,boolean),
    timers._sql_wants_autonomy(text),
    timers._sql_string_value(text[],boolean,text),
    timers._sql_scan(text,boolean,text,integer,boolean)
    FROM PUBLIC, pgtimers_reader, pgtimers_admin, pgtimers_runner;
GRANT EXECUTE ON FUNCTION
    timers._first_at_least(integer[],integer,integer),
    timers._sql_refusal_rules(boolean),
    timers._sql_refusal_head(text[],boolean),
    timers._sql_lex_pattern(boolean),
    timers._sql_dollar_delimiters(text),
    timers._sql_comment_delimiters(text),
    timers._sql_tokens(text,boolean),
    timers._sql_refused_words(),
    timers._sql_code(text),
    timers._sql_continued(bigint[],boolean[],text[]),
    timers._sql_statements(text),
    timers._sql_refusal(text[],boolean,boolean),
    timers._sql_line_col(text,integer),
    timers._sql_parse_error(text),
    timers._sql_error_position(text,text),
    timers._check_name(text),
    timers._check_sql(text,boolean),
    timers._sql_wants_autonomy(text),
    timers._sql_string_value(text[],boolean,text),
    timers._sql_scan(text,boolean,text,integer,boolean)
    TO pgtimers_admin, pgtimers_runner;

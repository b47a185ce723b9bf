-- Shared by the other tests: runs a statement, returns 'ok' or its SQLSTATE, message and detail.
CREATE FUNCTION try_sql(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE detail text;
BEGIN
  EXECUTE statement;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || COALESCE(' (' || NULLIF(detail, '') || ')', '');
END $$;

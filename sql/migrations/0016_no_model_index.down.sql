-- pyretrieve migration 0016, downgrade: back to 0015
-- Drafted by `python -m pyretrieve.db.draft` from a catalog diff; reviewed by hand.

-- pyretrieve_api creates the functions it owns while the migration runs.
GRANT USAGE, CREATE ON SCHEMA pyretrieve TO pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL search_path = pg_catalog, pg_temp;

SET LOCAL ROLE pyretrieve_owner;
CREATE OR REPLACE FUNCTION pyretrieve.create_model_index(p_model text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    m pyretrieve.embedding_models;
    v_name text;
BEGIN
    SELECT * INTO m FROM pyretrieve.embedding_models em WHERE em.model_id = p_model;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'PR012', MESSAGE = 'unknown embedding model';
    END IF;
    v_name := format('embeddings_hnsw_m%s', m.model_serial);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pyretrieve.embeddings USING hnsw ((embedding::public.vector(%s)) public.vector_cosine_ops) WHERE model_id = %L',
        v_name, m.dimension, m.model_id);
    RETURN v_name;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.create_model_index(text) IS 'Create the per-model HNSW index (cosine, on the embedding cast to the model''s dimension, partial on the model). SECURITY DEFINER because index creation needs the table owner; executable by admins and by register_model (pyretrieve_api) only.';
REVOKE ALL ON FUNCTION pyretrieve.create_model_index(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.create_model_index(text) TO pyretrieve_admin, pyretrieve_api;
SET LOCAL ROLE pyretrieve_owner;
SET LOCAL ROLE pyretrieve_api;
CREATE OR REPLACE FUNCTION pyretrieve.register_model(p_model text, p_dimension integer, p_lexical_weight double precision DEFAULT NULL::double precision, p_vector_weight double precision DEFAULT NULL::double precision, p_fusion text DEFAULT NULL::text)
 RETURNS text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_dimension integer;
BEGIN
    PERFORM pyretrieve.require_admin();
    IF p_model IS NULL OR p_model !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'invalid model id';
    END IF;
    IF p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION USING ERRCODE = 'PR010', MESSAGE = 'dimension must be between 1 and 2000';
    END IF;
    -- A fusion setting refused has its own SQLSTATE (contract.INVALID_FUSION_SQLSTATE), checked
    -- before anything is written. NaN passes "> 0" in PostgreSQL but fails "<= 1000".
    IF (p_lexical_weight IS NULL) <> (p_vector_weight IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'give both default weights or neither';
    END IF;
    IF p_lexical_weight IS NOT NULL
       AND NOT (p_lexical_weight > 0 AND p_lexical_weight <= 1000
                AND p_vector_weight > 0 AND p_vector_weight <= 1000) THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'default weights must be above 0 and at most 1000';
    END IF;
    IF p_fusion IS NOT NULL AND p_fusion NOT IN ('rrf', 'dbsf') THEN
        RAISE EXCEPTION USING ERRCODE = 'PR016', MESSAGE = 'fusion must be rrf or dbsf';
    END IF;
    INSERT INTO pyretrieve.embedding_models (model_id, dimension, lexical_weight, vector_weight, fusion)
    VALUES (p_model, p_dimension, coalesce(p_lexical_weight, 1.0), coalesce(p_vector_weight, 1.0),
            coalesce(p_fusion, 'rrf'))
    ON CONFLICT (model_id) DO NOTHING;
    SELECT m.dimension INTO v_dimension FROM pyretrieve.embedding_models m WHERE m.model_id = p_model;
    IF v_dimension <> p_dimension THEN
        RAISE EXCEPTION USING ERRCODE = 'PR013', MESSAGE = 'model already registered with another dimension';
    END IF;
    IF p_lexical_weight IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m
           SET lexical_weight = p_lexical_weight, vector_weight = p_vector_weight
         WHERE m.model_id = p_model;
    END IF;
    IF p_fusion IS NOT NULL THEN
        UPDATE pyretrieve.embedding_models m SET fusion = p_fusion WHERE m.model_id = p_model;
    END IF;
    PERFORM pyretrieve.create_model_index(p_model);
    RETURN p_model;
END;
$function$;
COMMENT ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) IS 'Register an embedding model and its dimension (idempotent) and create its HNSW index; returns the model id. With both default weights (each above 0, at most 1000) it sets the lexical and vector weights, and with p_fusion (rrf or dbsf) the fusion, that searches naming this model use when they give none; what is not given is 1.0 each and rrf for a new model and stays as it was for an existing one. Raises PR016 for an unknown fusion or default weights not both given or outside (0, 1000], before anything is written, and PR013 if the model exists with another dimension. Admins only. SECURITY DEFINER (runs as pyretrieve_api): principals reach the tables only through the SQL API.';
REVOKE ALL ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pyretrieve.register_model(text,integer,double precision,double precision,text) TO pyretrieve_admin;
SET LOCAL ROLE pyretrieve_owner;

-- register_model built each model's index: build them again.
SELECT pg_catalog.count(pyretrieve.create_model_index(m.model_id)) AS model_indexes
  FROM pyretrieve.embedding_models m;

UPDATE pyretrieve.installation SET schema_version = '0015';

RESET ROLE;
REVOKE CREATE ON SCHEMA pyretrieve FROM pyretrieve_api;

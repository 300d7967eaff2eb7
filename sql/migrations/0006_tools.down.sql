-- pyretrieve migration 0006, downgrade: drops the tool functions and tables. The tools'
-- fragments stay, as ordinary fragments.

SET LOCAL search_path = pg_catalog, pg_temp;
DROP FUNCTION pyretrieve.put_tool(text, text, jsonb, text, text[], text, pyretrieve.classification, timestamptz, timestamptz);
DROP FUNCTION pyretrieve.tool_entries(uuid, uuid[]);
DROP FUNCTION pyretrieve.tool_schemas(uuid, uuid[]);
DROP FUNCTION pyretrieve.tool_by_name(uuid, text);
DROP FUNCTION pyretrieve.tool_rollout(uuid);
DROP FUNCTION pyretrieve.set_tool_rollout(text, text, text);
DROP FUNCTION pyretrieve.tool_text(jsonb);
DROP FUNCTION pyretrieve.tool_argument_lines(jsonb, text);
DROP TABLE pyretrieve.tool_rollouts;
DROP TABLE pyretrieve.tools;

SET LOCAL ROLE pyretrieve_owner;
UPDATE pyretrieve.installation SET schema_version = '0005';
RESET ROLE;

/*
 * The table MySqlStore keeps its states in, and the procedure that writes
 * them: as @floodgate/postgres does, one row per key and rule (the state's
 * text in the engine's encoding, a random version each write draws, and when
 * the row may go on the database's clock), read in one statement, written in
 * a second one only if every row still holds the version read (else the
 * procedure signals SQLSTATE 40001, rolls back, and the store reads and
 * decides again). Keys compare byte by byte (utf8mb4_bin): 'A' and 'a' are
 * two keys. sql/floodgate_state.sql is this schema for the default name.
 */

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,56}$/;

export const isTableName = (name: string): boolean => TABLE_NAME.test(name);

/**
 * The DDL, one statement each: the table, and its write procedure. The procedure's name carries its
 * version (`_write1`): a build that writes differently creates a procedure of its own beside it.
 */
export function schemaStatements(table: string): string[] {
  const t = `\`${table}\``;
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  \`key\` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  \`value\` TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  \`version\` BIGINT NOT NULL,
  \`expires_at\` BIGINT NOT NULL,
  KEY \`${table}_expires_at\` (\`expires_at\`)
) ENGINE=InnoDB`,
    // writes: a JSON array of [key, version read (0: no row), new value (null: delete), ms to keep it, new version].
    `CREATE PROCEDURE \`${table}_write1\`(IN writes LONGTEXT)
BEGIN
  DECLARE n INT DEFAULT JSON_LENGTH(writes);
  DECLARE i INT DEFAULT 0;
  DECLARE now_ms BIGINT DEFAULT ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000);
  DECLARE k VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE was BIGINT;
  DECLARE changed INT;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  WHILE i < n DO
    SET k = JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][0]')));
    SET was = JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][1]')));
    SET v = IF(JSON_TYPE(JSON_EXTRACT(writes, CONCAT('$[', i, '][2]'))) = 'NULL', NULL, JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][2]'))));
    SET changed = 1;
    IF was = 0 THEN
      IF v IS NOT NULL THEN
        INSERT IGNORE INTO ${t} (\`key\`, \`value\`, \`version\`, \`expires_at\`)
          VALUES (k, v, JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][4]'))), now_ms + JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][3]'))));
        SET changed = ROW_COUNT();
      END IF;
    ELSEIF v IS NULL THEN
      DELETE FROM ${t} WHERE \`key\` = k AND \`version\` = was;
      SET changed = ROW_COUNT();
    ELSE
      UPDATE ${t} SET \`value\` = v, \`version\` = JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][4]'))),
          \`expires_at\` = now_ms + JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][3]')))
        WHERE \`key\` = k AND \`version\` = was;
      SET changed = ROW_COUNT();
    END IF;
    IF changed = 0 THEN
      ROLLBACK;
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'floodgate: a state changed since it was read';
    END IF;
    SET i = i + 1;
  END WHILE;
  COMMIT;
END`,
  ];
}

/** Reads the rows of a call's keys, in the keys' order, with the database's clock. ?: the keys as a JSON array. */
export const readSql = (table: string): string =>
  `SELECT s.\`value\` AS value, s.\`version\` AS version, s.\`expires_at\` AS expires_at, ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS now
FROM JSON_TABLE(?, '$[*]' COLUMNS (i FOR ORDINALITY, k VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS j
LEFT JOIN \`${table}\` s ON s.\`key\` = j.k
ORDER BY j.i`;

/** Writes a call's states. ?: the writes as JSON (see the procedure). */
export const writeSql = (table: string): string => `CALL \`${table}_write1\`(?)`;

/**
 * A page of live rows whose keys start with a prefix, in key order (utf8mb4_bin: code points). ?: the
 * prefix, the prefix with U+10FFFF after it (above every key that starts with it), the key to list
 * after, the count.
 */
export const listSql = (table: string): string =>
  `SELECT \`key\` AS k, \`value\` AS v FROM \`${table}\` WHERE \`key\` >= ? AND \`key\` < ? AND \`key\` > ? AND \`expires_at\` > ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) ORDER BY \`key\` LIMIT ?`;

/** Deletes up to `limit` rows whose time is up. ?: the limit. */
export const sweepSql = (table: string): string =>
  `DELETE FROM \`${table}\` WHERE \`expires_at\` < ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) ORDER BY \`expires_at\` LIMIT ?`;

/** sql/floodgate_state.sql: the DDL as a migration file for the mysql client (DELIMITER around the procedure). */
export function migrationSql(table: string): string {
  const [create, procedure] = schemaStatements(table) as [string, string];
  return `-- Floodgate's MySqlStore: its table and write procedure (createTable: false).\n${create};\n\nDELIMITER //\n${procedure} //\nDELIMITER ;\n`;
}

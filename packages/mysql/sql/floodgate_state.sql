-- Floodgate's MySqlStore: its table and write procedure (createTable: false).
CREATE TABLE IF NOT EXISTS `floodgate_state` (
  `key` VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  `value` TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `version` BIGINT NOT NULL,
  `expires_at` BIGINT NOT NULL,
  KEY `floodgate_state_expires_at` (`expires_at`)
) ENGINE=InnoDB;

DELIMITER //
CREATE PROCEDURE `floodgate_state_write1`(IN writes LONGTEXT)
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
        INSERT IGNORE INTO `floodgate_state` (`key`, `value`, `version`, `expires_at`)
          VALUES (k, v, JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][4]'))), now_ms + JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][3]'))));
        SET changed = ROW_COUNT();
      END IF;
    ELSEIF v IS NULL THEN
      DELETE FROM `floodgate_state` WHERE `key` = k AND `version` = was;
      SET changed = ROW_COUNT();
    ELSE
      UPDATE `floodgate_state` SET `value` = v, `version` = JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][4]'))),
          `expires_at` = now_ms + JSON_UNQUOTE(JSON_EXTRACT(writes, CONCAT('$[', i, '][3]')))
        WHERE `key` = k AND `version` = was;
      SET changed = ROW_COUNT();
    END IF;
    IF changed = 0 THEN
      ROLLBACK;
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'floodgate: a state changed since it was read';
    END IF;
    SET i = i + 1;
  END WHILE;
  COMMIT;
END //
DELIMITER ;

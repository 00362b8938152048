/*M!999999\- enable the sandbox mode */ 
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `batches` (
  `id` bigint(20) unsigned NOT NULL,
  `version` bigint(20) unsigned NOT NULL,
  `billing_project` varchar(255) NOT NULL,
  `owner` varchar(255) NOT NULL,
  `name` varchar(255) NOT NULL,
  `complete` tinyint(1) NOT NULL,
  `cancelled` tinyint(1) NOT NULL,
  `all_succeeded` tinyint(1) NOT NULL,
  `any_bad` tinyint(1) NOT NULL,
  `doc` mediumblob NOT NULL,
  PRIMARY KEY (`id`),
  KEY `by_project` (`billing_project`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
/*!40101 SET character_set_client = @saved_cs_client */;
INSERT INTO `batches` VALUES
(1,3,'genomics','alice','b',1,0,1,0,'{\"id\":1,\"name\":\"b\",\"user\":\"alice\",\"billing_project\":\"genomics\",\"state\":\"complete\",\"cancelled\":false,\"n_jobs\":1,\"n_pending\":0,\"n_ready\":0,\"n_running\":0,\"n_completed\":1,\"n_succeeded\":1,\"n_failed\":0,\"n_cancelled\":0,\"n_error\":0,\"n_updates\":1,\"time_created\":\"2026-11-20T10:00:00Z\",\"time_completed\":\"2026-11-20T11:00:00Z\",\"cost\":0.3,\"Version\":3}'),
(2,3,'genomics','bob','b',1,0,1,0,'{\"id\":2,\"name\":\"b\",\"user\":\"bob\",\"billing_project\":\"genomics\",\"state\":\"complete\",\"cancelled\":false,\"n_jobs\":1,\"n_pending\":0,\"n_ready\":0,\"n_running\":0,\"n_completed\":1,\"n_succeeded\":1,\"n_failed\":0,\"n_cancelled\":0,\"n_error\":0,\"n_updates\":1,\"time_created\":\"2026-11-20T10:00:00Z\",\"time_completed\":\"2026-11-20T11:00:00Z\",\"cost\":20.031234,\"Version\":3}'),
(3,3,'genomics','alice','b',1,0,1,0,'{\"id\":3,\"name\":\"b\",\"user\":\"alice\",\"billing_project\":\"genomics\",\"state\":\"complete\",\"cancelled\":false,\"n_jobs\":1,\"n_pending\":0,\"n_ready\":0,\"n_running\":0,\"n_completed\":1,\"n_succeeded\":1,\"n_failed\":0,\"n_cancelled\":0,\"n_error\":0,\"n_updates\":1,\"time_created\":\"2026-11-20T10:00:00Z\",\"time_completed\":\"2026-11-20T11:00:00Z\",\"cost\":0.00001562412018379771,\"Version\":3}'),
(4,3,'genomics','bob','b',1,0,1,0,'{\"id\":4,\"name\":\"b\",\"user\":\"bob\",\"billing_project\":\"genomics\",\"state\":\"complete\",\"cancelled\":false,\"n_jobs\":1,\"n_pending\":0,\"n_ready\":0,\"n_running\":0,\"n_completed\":1,\"n_succeeded\":1,\"n_failed\":0,\"n_cancelled\":0,\"n_error\":0,\"n_updates\":1,\"time_created\":\"2026-11-20T10:00:00Z\",\"time_completed\":\"2026-11-20T11:00:00Z\",\"cost\":123456.78901234567,\"Version\":3}');
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `job_groups` (
  `batch_id` bigint(20) unsigned NOT NULL,
  `first_job` int(10) unsigned NOT NULL,
  `doc` mediumblob NOT NULL,
  PRIMARY KEY (`batch_id`,`first_job`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
/*!40101 SET character_set_client = @saved_cs_client */;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `jobs` (
  `batch_id` bigint(20) unsigned NOT NULL,
  `job_id` int(10) unsigned NOT NULL,
  `state` varchar(16) NOT NULL,
  `doc` mediumblob NOT NULL,
  PRIMARY KEY (`batch_id`,`job_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
/*!40101 SET character_set_client = @saved_cs_client */;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `ledger` (
  `billing_project` varchar(255) NOT NULL,
  `day` int(11) NOT NULL,
  `batch_id` bigint(20) unsigned NOT NULL,
  `owner` varchar(255) NOT NULL,
  `cost` double NOT NULL,
  PRIMARY KEY (`billing_project`,`day`,`batch_id`,`owner`),
  KEY `by_batch` (`batch_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
/*!40101 SET character_set_client = @saved_cs_client */;
INSERT INTO `ledger` VALUES
('genomics',20777,1,'alice',0.1),
('genomics',20777,2,'bob',20.031234),
('genomics',20777,3,'alice',0.00001562412018379771),
('genomics',20777,4,'bob',0.00000000004),
('genomics',20778,1,'alice',0.2),
('genomics',20778,4,'bob',123456.78901234567);
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `schema_migrations` (
  `version` int(11) NOT NULL,
  `applied_at` bigint(20) NOT NULL,
  PRIMARY KEY (`version`)
) ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci;
/*!40101 SET character_set_client = @saved_cs_client */;
INSERT INTO `schema_migrations` VALUES
(1,1795611644),
(2,1795611644),
(3,1795611644),
(4,1795611644);

# A job that takes its worker down is given up after one loss; a long
# simulation on spot machines is run again however often it is lost, as
# Hail Batch does.
batch "lost" {
  job "suspect" {
    command           = ["./maybe-crash"]
    max_lost_attempts = 1
  }
  job "simulate" {
    command           = ["./simulate"]
    max_lost_attempts = -1
  }
}

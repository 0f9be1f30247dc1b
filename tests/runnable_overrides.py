"""What a run's command gives verl beside the avspo keys: the micro-batch sizes verl's validate_config asks for, which
the stock ppo_trainer config leaves unset (the doctor checks the config as main_ppo will)."""

RUNNABLE = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"]
